package bench

import (
	"math"
	"testing"
	"time"
)

// The send-wait quantiles are read from the engine's buckets the way
// Prometheus's histogram_quantile reads them, so the report and an
// operator's dashboard give the same figure.
func TestHistogramQuantile_InterpolatesWithinTheBucketAsHistogramQuantileDoes(t *testing.T) {
	h := histogram{
		bounds: []float64{.001, .002, .004, math.Inf(1)},
		counts: []uint64{50, 90, 99, 100}, // cumulative
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.25, 500 * time.Microsecond}, // halfway into the first bucket, from 0
		{0.5, time.Millisecond},        // the first bucket's bound
		{0.7, 1500 * time.Microsecond}, // halfway into the second
		{0.99, 4 * time.Millisecond},   // the last finite bound
		{0.995, 4 * time.Millisecond},  // in +Inf's bucket: the highest finite bound
	} {
		if got := h.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := (&histogram{}).quantile(0.5); got != 0 {
		t.Errorf("quantile of an empty histogram = %v, want 0", got)
	}
}
