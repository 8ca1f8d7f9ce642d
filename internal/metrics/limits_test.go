package metrics

import (
	"fmt"
	"testing"

	"github.com/jetrelay/jetrelay/engine"
)

func TestWatchLimits_ReportsTheLimitsAsADistributionNotOneSeriesPerSubscription(t *testing.T) {
	m := New(Options{})
	var ls []engine.SubscriptionLimit
	for i := range 5000 {
		ls = append(ls, engine.SubscriptionLimit{SubscriptionID: fmt.Sprintf("whsub_%d", i), Limit: 1 + i%3, InFlight: i % 2})
	}
	ls = append(ls, engine.SubscriptionLimit{SubscriptionID: "whsub_fast", Limit: 64, InFlight: 40})
	m.WatchLimits(func() []engine.SubscriptionLimit { return ls })
	fams := families(t, m)
	h := fams["jetrelay_subscription_limit"].GetMetric()
	if len(h) != 1 {
		t.Fatalf("jetrelay_subscription_limit has %d series, want 1", len(h))
	}
	hist := h[0].GetHistogram()
	if hist.GetSampleCount() != 5001 {
		t.Errorf("histogram counts %d busy subscriptions, want 5001", hist.GetSampleCount())
	}
	want := map[float64]uint64{1: 1667, 2: 3334, 4: 5000, 32: 5000, 64: 5001}
	for _, b := range hist.GetBucket() {
		if w, ok := want[b.GetUpperBound()]; ok && b.GetCumulativeCount() != w {
			t.Errorf("subscriptions with a limit of at most %v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), w)
		}
	}
	if v := seriesValues(fams["jetrelay_subscription_limit_max"])[""]; v != 64 {
		t.Errorf("largest limit = %v, want 64", v)
	}
	if v := seriesValues(fams["jetrelay_subscription_in_flight_max"])[""]; v != 40 {
		t.Errorf("most sends to one subscription = %v, want 40", v)
	}
}
