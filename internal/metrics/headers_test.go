package metrics

import (
	"maps"
	"testing"

	"github.com/jetrelay/jetrelay/engine"
)

func TestHeaderDropped_CountsByReservedNameWithUnknownXCyclesFolded(t *testing.T) {
	m := New(Options{})
	for _, name := range []string{"Content-Type", "content-type", "X-Cycles-Signature", "X-Cycles-Tenant", "x-cycles-anything"} {
		m.HeaderDropped(engine.Labels{}, name)
	}
	got := seriesValues(families(t, m)["jetrelay_custom_headers_dropped_total"])
	want := map[string]float64{"header=content-type": 2, "header=x-cycles-signature": 1, "header=x-cycles-*": 2}
	if !maps.Equal(got, want) {
		t.Errorf("series = %v, want %v", got, want)
	}
}
