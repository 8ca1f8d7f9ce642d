package engine_test

import (
	"context"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/proto"
)

// seen is what a receiver got on each request.
type seen struct {
	traceparent, traceID string
}

// tracedEnv is a pipeline whose bridge and engine trace into an in-memory exporter and
// whose receiver, under /custom/hook, continues the trace with otelhttp. The
// receiver answers 503 to the first failFirst requests, then 200.
func tracedEnv(t *testing.T, failFirst int32) (*env, *tracetest.InMemoryExporter, func() []seen) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var mu sync.Mutex
	var got []seen
	var n atomic.Int32
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Header.Get("traceparent"), r.Header.Get(proto.HeaderTraceID)})
		mu.Unlock()
		if n.Add(1) <= failFirst {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h := otelhttp.NewHandler(inner, "receive", otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
	e := newEnv(t, envOptions{handler: h, tracer: tp})
	return e, exp, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), got...)
	}
}

func spansOfKind(spans tracetest.SpanStubs, k trace.SpanKind) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.SpanKind == k {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func hasEvent(s tracetest.SpanStub, name, reason string) bool {
	for _, ev := range s.Events {
		if ev.Name != name {
			continue
		}
		for _, kv := range ev.Attributes {
			if kv.Key == "jetrelay.reason" && kv.Value.AsString() == reason {
				return true
			}
		}
	}
	return false
}

func TestTracing_OneTraceRunsFromTheBridgeThroughEachAttemptAndSendToTheReceiver(t *testing.T) {
	e, exp, requests := tracedEnv(t, 1)
	sub, _, _ := e.subscribe(t, "/custom/hook", nil, nil)
	ev := e.event()
	rec := e.final(t, e.deliver(t, sub, ev, nil))
	if rec.Status != proto.DeliverySuccess || rec.Attempts != 2 {
		t.Fatalf("want SUCCESS after a retry, got %s", rec.Raw)
	}
	// The server span ends after the response is written, the attempt span
	// after the outcome is: wait for both of each.
	waitFor(t, 5*time.Second, "both receiver spans and both attempt spans", func() bool {
		spans := exp.GetSpans()
		return len(spansOfKind(spans, trace.SpanKindServer)) == 2 && len(spansOfKind(spans, trace.SpanKindConsumer)) == 2
	})
	spans := exp.GetSpans()
	for _, s := range spans {
		if got := s.SpanContext.TraceID().String(); got != ev.TraceID {
			t.Errorf("span %q is in trace %s, want the event's trace %s", s.Name, got, ev.TraceID)
		}
	}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}

	attempts := map[int64]tracetest.SpanStub{}
	for _, s := range spansOfKind(spans, trace.SpanKindConsumer) {
		if s.Name != "process jetrelay.dispatch" || attr(s, "messaging.system").AsString() != "nats" {
			t.Errorf("attempt span %q has messaging.system %q", s.Name, attr(s, "messaging.system").AsString())
		}
		if p, ok := byID[s.Parent.SpanID()]; !ok || p.SpanKind != trace.SpanKindProducer {
			t.Errorf("attempt span's parent %s is not a bridge publish span", s.Parent.SpanID())
		}
		if attr(s, "messaging.nats.delivery_count").AsInt64() < 1 {
			t.Errorf("attempt span without messaging.nats.delivery_count")
		}
		attempts[attr(s, "jetrelay.attempt").AsInt64()] = s
	}
	if len(attempts[1].Name) == 0 || len(attempts[2].Name) == 0 {
		t.Fatalf("want attempt spans for attempts 1 and 2, got %v", attempts)
	}
	for _, s := range spansOfKind(spans, trace.SpanKindProducer) {
		if s.Name != "send jetrelay.dispatch" || attr(s, "messaging.system").AsString() != "nats" {
			t.Errorf("publish span %q has messaging.system %q", s.Name, attr(s, "messaging.system").AsString())
		}
		if !s.Parent.IsRemote() || s.Parent.TraceID().String() != ev.TraceID {
			t.Errorf("publish span's parent %v is not the event's remote context", s.Parent)
		}
	}
	if !hasEvent(attempts[1], "jetrelay.retry_scheduled", "http_5xx") {
		t.Errorf("attempt 1 has no retry_scheduled event with reason http_5xx: %+v", attempts[1].Events)
	}
	if !hasEvent(attempts[2], "jetrelay.delivered", "delivered") {
		t.Errorf("attempt 2 has no delivered event: %+v", attempts[2].Events)
	}
	checkChain(t, tracetest.SpanStubs{attempts[1], attempts[2]})

	sends := spansOfKind(spans, trace.SpanKindClient)
	servers := spansOfKind(spans, trace.SpanKindServer)
	if len(sends) != 2 {
		t.Fatalf("want 2 send spans, got %d", len(sends))
	}
	parents := map[trace.SpanID]bool{}
	for _, s := range sends {
		p, ok := byID[s.Parent.SpanID()]
		if !ok || p.SpanKind != trace.SpanKindConsumer {
			t.Errorf("send span's parent %s is not an attempt span", s.Parent.SpanID())
		}
		parents[s.Parent.SpanID()] = true
		if s.Name != "POST" || attr(s, "transport").AsString() != "http" || attr(s, "server.address").AsString() != "127.0.0.1" {
			t.Errorf("send span %q: transport=%q server.address=%q", s.Name, attr(s, "transport").AsString(), attr(s, "server.address").AsString())
		}
	}
	if len(parents) != 2 {
		t.Errorf("both sends hang under the same attempt span")
	}
	for _, s := range servers {
		p, ok := byID[s.Parent.SpanID()]
		if !ok || p.SpanKind != trace.SpanKindClient {
			t.Errorf("receiver span's parent %s is not a send span", s.Parent.SpanID())
		}
	}

	sendIDs := map[string]bool{}
	for _, s := range sends {
		sendIDs[s.SpanContext.SpanID().String()] = true
	}
	reqs := requests()
	if len(reqs) != 2 {
		t.Fatalf("receiver got %d requests, want 2", len(reqs))
	}
	tp := regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)
	for _, r := range reqs {
		m := tp.FindStringSubmatch(r.traceparent)
		if m == nil || m[1] != ev.TraceID || !sendIDs[m[2]] {
			t.Errorf("outbound traceparent %q does not carry the event's trace and a send span's id", r.traceparent)
		}
		if r.traceID != ev.TraceID {
			t.Errorf("X-Cycles-Trace-Id = %q, want the event's %q", r.traceID, ev.TraceID)
		}
	}
}

func TestTracing_AnUnsampledInboundTraceRecordsNoSpansAndKeepsItsFlags(t *testing.T) {
	e, exp, requests := tracedEnv(t, 0)
	sub, _, _ := e.subscribe(t, "/custom/hook", nil, nil)
	ev := e.event()
	rec := e.final(t, e.deliver(t, sub, ev, func(d *admin.Delivery) {
		d.TraceFlags, d.TraceparentInboundValid = "00", ptr(true)
	}))
	if rec.Status != proto.DeliverySuccess {
		t.Fatalf("record = %s", rec.Raw)
	}
	reqs := requests()
	if len(reqs) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(reqs))
	}
	if !regexp.MustCompile(`^00-` + ev.TraceID + `-[0-9a-f]{16}-00$`).MatchString(reqs[0].traceparent) {
		t.Errorf("outbound traceparent %q, want the event's trace with the inbound flags 00", reqs[0].traceparent)
	}
	e.idle(t)
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("an unsampled trace exported %d spans", n)
	}
}
