package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/jetrelay/jetrelay/engine"
)

// families gathers m's registry by name.
func families(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// labelsOf renders a series' labels as name=value pairs, sorted.
func labelsOf(mt *dto.Metric) string {
	var parts []string
	for _, lp := range mt.GetLabel() {
		parts = append(parts, lp.GetName()+"="+lp.GetValue())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// seriesValues maps each series of a counter or gauge family to its value.
func seriesValues(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, mt := range mf.GetMetric() {
		switch {
		case mt.Counter != nil:
			out[labelsOf(mt)] = mt.GetCounter().GetValue()
		case mt.Gauge != nil:
			out[labelsOf(mt)] = mt.GetGauge().GetValue()
		case mt.Summary != nil:
			out[labelsOf(mt)] = float64(mt.GetSummary().GetSampleCount())
		}
	}
	return out
}

func TestObserver_CountsOutcomesWithTheReferenceLabels(t *testing.T) {
	cases := []struct {
		name      string
		tenantTag bool
		want      map[string]map[string]float64
	}{
		{"tenant tag off, as upstream's default", false, map[string]map[string]float64{
			"cycles_webhook_delivery_attempts_total":          {"event_type=budget.exhausted": 2},
			"cycles_webhook_delivery_success_total":           {"event_type=budget.exhausted,status_code_family=2xx": 1},
			"cycles_webhook_delivery_failed_total":            {"event_type=budget.exhausted,reason=http_5xx": 1, "event_type=budget.exhausted,reason=http_4xx": 1, "event_type=UNKNOWN,reason=event_not_found": 1},
			"cycles_webhook_delivery_retried_total":           {"event_type=budget.exhausted": 1},
			"cycles_webhook_delivery_stale_total":             {"": 1},
			"cycles_webhook_subscription_auto_disabled_total": {"reason=consecutive_failures": 1},
			"cycles_webhook_delivery_latency_seconds":         {"event_type=budget.exhausted,outcome=success": 1, "event_type=budget.exhausted,outcome=failure": 1},
			"cycles_webhook_events_payload_invalid_total":     {"rule=trace_id_shape,type=budget.exhausted": 1},
			"jetrelay_transport_sends_total":                  {"outcome=delivered,transport=https": 1, "outcome=failed,transport=https": 1},
			"jetrelay_deliveries_postponed_total":             {"reason=breaker_open": 1, "reason=other": 1},
			"jetrelay_sends_in_flight":                        {"": 0},
		}},
		{"tenant tag on", true, map[string]map[string]float64{
			"cycles_webhook_delivery_attempts_total":          {"event_type=budget.exhausted,tenant=acme": 2},
			"cycles_webhook_delivery_success_total":           {"event_type=budget.exhausted,status_code_family=2xx,tenant=acme": 1},
			"cycles_webhook_delivery_latency_seconds":         {"event_type=budget.exhausted,outcome=success,tenant=acme": 1, "event_type=budget.exhausted,outcome=failure,tenant=acme": 1},
			"jetrelay_transport_sends_total":                  {"outcome=delivered,transport=https": 1, "outcome=failed,transport=https": 1},
			"cycles_webhook_delivery_failed_total":            {"event_type=budget.exhausted,reason=http_5xx,tenant=acme": 1, "event_type=budget.exhausted,reason=http_4xx,tenant=acme": 1, "event_type=UNKNOWN,reason=event_not_found,tenant=UNKNOWN": 1},
			"cycles_webhook_delivery_stale_total":             {"tenant=UNKNOWN": 1},
			"cycles_webhook_subscription_auto_disabled_total": {"reason=consecutive_failures,tenant=acme": 1},
			"cycles_webhook_events_payload_invalid_total":     {"rule=trace_id_shape,type=budget.exhausted": 1},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := New(Options{TenantTag: c.tenantTag})
			l := engine.Labels{TenantID: "acme", EventType: "budget.exhausted"}
			m.Sending(l)
			m.Sent(l, engine.Send{Transport: "https", Outcome: "delivered", StatusCode: 204, Latency: 20 * time.Millisecond})
			m.Decided(engine.Decision{Kind: engine.Delivered, Labels: l, StatusCode: 204, Latency: 20 * time.Millisecond, Age: 3 * time.Second})
			m.Sending(l)
			m.Sent(l, engine.Send{Transport: "https", Outcome: "failed", StatusCode: 503, Latency: 40 * time.Millisecond})
			m.Decided(engine.Decision{Kind: engine.Retrying, Labels: l, Reason: "http_5xx", Latency: 40 * time.Millisecond})
			m.Decided(engine.Decision{Kind: engine.Failed, Reason: "event_not_found"})
			// A delivery whose schedule ran out at the open breaker: failed
			// with the endpoint's last answer, no send, and it disabled the
			// subscription.
			m.Decided(engine.Decision{Kind: engine.Failed, Labels: l, Reason: "http_4xx", AutoDisabled: true})
			m.Decided(engine.Decision{Kind: engine.Stale, Labels: l})
			m.PayloadInvalid("budget.exhausted", "trace_id_shape")
			m.Decided(engine.Decision{Kind: engine.PutOff, Reason: "breaker_open"})
			m.Decided(engine.Decision{Kind: engine.PutOff, Reason: "subscription_SOMETHING_new"})

			got := families(t, m)
			for name, want := range c.want {
				mf := got[name]
				if mf == nil {
					t.Errorf("%s missing from the registry", name)
					continue
				}
				have := seriesValues(mf)
				for series, v := range want {
					if hv, ok := have[series]; !ok || hv != v {
						t.Errorf("%s{%s} = %v (present %v), want %v; series: %v", name, series, hv, ok, v, have)
					}
				}
			}
			if mx := got["cycles_webhook_delivery_latency_seconds_max"]; mx == nil || len(mx.GetMetric()) != 2 {
				t.Errorf("cycles_webhook_delivery_latency_seconds_max = %v, want one gauge per outcome", mx)
			}
		})
	}
}

func TestCapped_FoldsEventTypesPastTheCapIntoOther(t *testing.T) {
	c := newCapped(3)
	for i := range 3 {
		if v := c.value(fmt.Sprintf("type.%d", i)); v != fmt.Sprintf("type.%d", i) {
			t.Fatalf("value %d under the cap became %q", i, v)
		}
	}
	cases := []struct{ in, want string }{
		{"type.0", "type.0"}, // seen before the cap: keeps its series
		{"type.3", Other},    // new past the cap
		{"", Unknown},        // null or blank: the reference's UNKNOWN
		{"  ", Unknown},      //
		{"\xff\xfe", Other},  // not UTF-8: never a label value
		{strings.Repeat("x", 200), Other},
	}
	for _, tc := range cases {
		if got := c.value(tc.in); got != tc.want {
			t.Errorf("value(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestObserver_ManyEventTypesStayWithinTheCap(t *testing.T) {
	m := New(Options{MaxEventTypes: 5})
	for i := range 1000 {
		m.Sending(engine.Labels{EventType: fmt.Sprintf("spam.%d", i)})
	}
	if n := len(families(t, m)["cycles_webhook_delivery_attempts_total"].GetMetric()); n != 6 {
		t.Errorf("1000 event types made %d attempts series, want 5 plus other", n)
	}
}

func TestWindowMax_KeepsTheLargestValueForTwoMinutesThenDecays(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	w := newWindowMax("x_max", "test", []string{"outcome"})
	w.now = func() time.Time { return now }
	read := func() float64 {
		ch := make(chan prometheus.Metric, 1)
		go func() { w.Collect(ch); close(ch) }()
		var v float64
		for mt := range ch {
			var d dto.Metric
			if err := mt.Write(&d); err != nil {
				t.Fatal(err)
			}
			v = d.GetGauge().GetValue()
		}
		return v
	}
	success := w.ring([]string{"success"})
	w.observeRing(success, 2.5)
	w.observeRing(w.ring([]string{"success"}), 1) // the same series
	if v := read(); v != 2.5 {
		t.Fatalf("max right after = %v, want 2.5", v)
	}
	now = now.Add(100 * time.Second)
	if v := read(); v != 2.5 {
		t.Errorf("max after 100s = %v, want 2.5 (still in the two-minute window)", v)
	}
	now = now.Add(30 * time.Second)
	if v := read(); v != 0 {
		t.Errorf("max after 130s with nothing new = %v, want 0", v)
	}
}

func TestHandler_ServesTheTextFormat(t *testing.T) {
	m := New(Options{Version: "1.2.3"})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 || !strings.Contains(string(body), `jetrelay_build_info{version="1.2.3"} 1`) {
		t.Errorf("/metrics answered %d without the build info:\n%.500s", rec.Code, body)
	}
}
