package metrics

import (
	"fmt"
	"testing"

	"github.com/jetrelay/jetrelay/engine"
)

func TestObserver_CountsATransportsAnswerReasonInItsOwnSeriesWithinACap(t *testing.T) {
	m := New(Options{})
	l := engine.Labels{EventType: "budget.exhausted"}
	m.Decided(engine.Decision{Kind: engine.Failed, Labels: l, Reason: "nats_stream_full"})
	m.Decided(engine.Decision{Kind: engine.Retrying, Labels: l, Reason: "sqs_throttled"})
	m.Decided(engine.Decision{Kind: engine.Failed, Labels: l, Reason: "Not A Token"})
	for i := range 100 {
		m.Decided(engine.Decision{Kind: engine.Failed, Labels: l, Reason: fmt.Sprintf("plugin_refusal_%d", i)})
	}
	got := seriesValues(families(t, m)["cycles_webhook_delivery_failed_total"])
	for _, want := range []string{"nats_stream_full", "sqs_throttled"} {
		if got["event_type=budget.exhausted,reason="+want] != 1 {
			t.Errorf("reason %s not counted in its own series: %v", want, got)
		}
	}
	if n := len(got); n != maxAnswerReasons+1 {
		t.Errorf("%d failed series after 102 distinct answer reasons, want the cap %d plus other", n, maxAnswerReasons)
	}
	if got["event_type=budget.exhausted,reason=other"] != 103-maxAnswerReasons { // 103 failed sends, one in each of the cap's series
		t.Errorf("other = %v, want the invalid reason and those past the cap", got["event_type=budget.exhausted,reason=other"])
	}
}
