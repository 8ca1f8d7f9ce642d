package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// handlings returns the attempt spans of delivery id, in the order they
// started.
func handlings(spans tracetest.SpanStubs, id string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spansOfKind(spans, trace.SpanKindConsumer) {
		if attr(s, "jetrelay.delivery_id").AsString() == id {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	return out
}

// checkChain checks that the first handling links to nothing and every
// later one to the handling before it, marked as its previous attempt.
func checkChain(t *testing.T, hs tracetest.SpanStubs) {
	t.Helper()
	for i, s := range hs {
		if i == 0 {
			if len(s.Links) != 0 {
				t.Errorf("the first handling links to %+v, want nothing", s.Links)
			}
			continue
		}
		prev := hs[i-1].SpanContext
		if len(s.Links) != 1 || !s.Links[0].SpanContext.Equal(prev.WithRemote(true)) ||
			len(s.Links[0].Attributes) != 1 || s.Links[0].Attributes[0].Key != "jetrelay.link" ||
			s.Links[0].Attributes[0].Value.AsString() != "previous_attempt" {
			t.Errorf("handling %d (attempt %d) links to %+v, want handling %d (%s) as jetrelay.link=previous_attempt",
				i+1, attr(s, "jetrelay.attempt").AsInt64(), s.Links, i, prev.SpanID())
		}
	}
}

// linkGone waits until the delivery's trace link key is removed, which the
// handling that reaches a final outcome does once its span has ended.
func (e *env) linkGone(t *testing.T, id string) {
	t.Helper()
	waitFor(t, 5*time.Second, "jetrelay:trace:"+id+" to be removed", func() bool {
		return e.redis.Client.Exists(context.Background(), store.TraceLinkKey(id)).Val() == 0
	})
}

func TestTracing_EachAttemptOfADeliveryLinksToTheAttemptBefore(t *testing.T) {
	t.Parallel()
	e, exp, _ := tracedEnv(t, 2)
	sub, _, _ := e.subscribe(t, "/custom/hook", nil, nil)
	ev := e.event()
	id := e.deliver(t, sub, ev, nil)
	if rec := e.final(t, id); rec.Status != proto.DeliverySuccess || rec.Attempts != 3 {
		t.Fatalf("want SUCCESS at attempt 3, got %s", rec.Raw)
	}
	e.linkGone(t, id)
	hs := handlings(exp.GetSpans(), id)
	if len(hs) != 3 {
		t.Fatalf("want 3 attempt spans, got %d", len(hs))
	}
	for i, s := range hs {
		if n := attr(s, "jetrelay.attempt").AsInt64(); n != int64(i+1) {
			t.Errorf("handling %d is attempt %d", i+1, n)
		}
		if s.SpanContext.TraceID().String() != ev.TraceID {
			t.Errorf("attempt %d is in trace %s, want the event's %s", i+1, s.SpanContext.TraceID(), ev.TraceID)
		}
	}
	checkChain(t, hs)
}

func TestTracing_AScheduledRetryIsPublishedUnderItsOwnSpanAndLinksToTheAttemptThatScheduledIt(t *testing.T) {
	t.Parallel()
	e, exp, _ := tracedEnv(t, 1)
	// A retry delay above ParkAfter (200ms): the retry waits as a JetStream wake-up.
	sub, _, _ := e.subscribe(t, "/custom/hook", nil, func(s *admin.Subscription) {
		s.RetryPolicy = &proto.RetryPolicy{MaxRetries: ptr(2), InitialDelayMs: ptr(int64(600)), BackoffMultiplier: ptr(1.0), MaxDelayMs: ptr(int64(1000))}
	})
	ev := e.event()
	id := e.deliver(t, sub, ev, nil)
	if rec := e.final(t, id); rec.Status != proto.DeliverySuccess || rec.Attempts != 2 {
		t.Fatalf("want SUCCESS at attempt 2, got %s", rec.Raw)
	}
	e.linkGone(t, id)
	spans := exp.GetSpans()
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != ev.TraceID {
			t.Errorf("span %q is in trace %s, want the event's %s", s.Name, s.SpanContext.TraceID(), ev.TraceID)
		}
	}
	var publish, promotion tracetest.SpanStub
	for _, s := range spansOfKind(spans, trace.SpanKindProducer) {
		if attr(s, "jetrelay.deferred").AsBool() {
			promotion = s
		} else {
			publish = s
		}
	}
	if !publish.SpanContext.IsValid() || !promotion.SpanContext.IsValid() {
		t.Fatalf("want the pending publish span and a promotion span, got %d producer spans", len(spansOfKind(spans, trace.SpanKindProducer)))
	}
	if promotion.Name != "send jetrelay.dispatch" || !promotion.Parent.IsRemote() || promotion.Parent.SpanID() != publish.Parent.SpanID() {
		t.Errorf("promotion span %q has parent %s, want the delivery's remote context %s like the first publish", promotion.Name, promotion.Parent.SpanID(), publish.Parent.SpanID())
	}
	hs := handlings(spans, id)
	if len(hs) != 2 {
		t.Fatalf("want 2 attempt spans, got %d", len(hs))
	}
	if hs[0].Parent.SpanID() != publish.SpanContext.SpanID() {
		t.Errorf("attempt 1 is not the child of the first publish span")
	}
	if hs[1].Parent.SpanID() != promotion.SpanContext.SpanID() {
		t.Errorf("attempt 2's parent is %s, want the promotion span %s", hs[1].Parent.SpanID(), promotion.SpanContext.SpanID())
	}
	checkChain(t, hs)

	// The promotion says when the delivery was due: when attempt 1 scheduled its retry.
	var until string
	for _, ev := range hs[0].Events {
		for _, kv := range ev.Attributes {
			if ev.Name == "jetrelay.retry_scheduled" && kv.Key == "jetrelay.until" {
				until = kv.Value.AsString()
			}
		}
	}
	due := attr(promotion, "jetrelay.due").AsString()
	if until == "" || due != until {
		t.Errorf("promotion's jetrelay.due = %q, want attempt 1's retry time %q", due, until)
	}
	dueAt, err := time.Parse(time.RFC3339Nano, due)
	if err != nil {
		t.Fatalf("jetrelay.due %q: %v", due, err)
	}
	if dueAt.IsZero() || attr(promotion, "messaging.destination.name").AsString() != "jetrelay.dispatch.sched."+id {
		t.Errorf("wake-up span published to %q, want the delivery's schedule subject", attr(promotion, "messaging.destination.name").AsString())
	}
}

func TestTracing_ANeverAttemptedDeliveryParkedForAPausedSubscriptionChainsEveryHandling(t *testing.T) {
	t.Parallel()
	e, exp, _ := tracedEnv(t, 0)
	sub, _, _ := e.subscribe(t, "/custom/hook", nil, func(s *admin.Subscription) { s.Status = proto.SubscriptionPaused })
	ev := e.event()
	id := e.deliver(t, sub, ev, nil)
	waitFor(t, 10*time.Second, "the delivery to be parked and its handling remembered", func() bool {
		return e.parked(id) && e.redis.Client.Exists(context.Background(), store.TraceLinkKey(id)).Val() == 1
	})
	if err := e.admin.SetStatus(context.Background(), sub, proto.SubscriptionActive); err != nil {
		t.Fatal(err)
	}
	if rec := e.final(t, id); rec.Status != proto.DeliverySuccess || rec.Attempts != 1 {
		t.Fatalf("want SUCCESS at attempt 1, got %s", rec.Raw)
	}
	e.linkGone(t, id)
	spans := exp.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	hs := handlings(spans, id)
	if len(hs) < 2 {
		t.Fatalf("want a put-off and the delivering handling, got %d attempt spans", len(hs))
	}
	if !hasEvent(hs[0], "jetrelay.deferred", "subscription_paused") {
		t.Errorf("the first handling has no subscription_paused deferral: %+v", hs[0].Events)
	}
	for i, s := range hs[1:] {
		if p := byID[s.Parent.SpanID()]; p.SpanKind != trace.SpanKindProducer || !attr(p, "jetrelay.deferred").AsBool() {
			t.Errorf("handling %d's parent is not a promotion span", i+2)
		}
		if s.SpanContext.TraceID().String() != ev.TraceID {
			t.Errorf("handling %d is in trace %s, want the event's %s", i+2, s.SpanContext.TraceID(), ev.TraceID)
		}
	}
	checkChain(t, hs)
}

func TestTracing_OffWritesNoTraceLinkKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	if err := e.redis.Client.ConfigSet(ctx, "notify-keyspace-events", "KA").Err(); err != nil {
		t.Fatal(err)
	}
	watch := e.redis.Client.PSubscribe(ctx, "__keyspace@0__:jetrelay:trace:*")
	t.Cleanup(func() { watch.Close() })
	if _, err := watch.Receive(ctx); err != nil {
		t.Fatalf("subscribe to keyspace events: %v", err)
	}
	// Retried through delayed naks, and through jetrelay:deferred.
	naked, _, _ := e.subscribe(t, "/nak", receiver.FailFirst(2), nil)
	parked, _, _ := e.subscribe(t, "/park", receiver.FailFirst(1), func(s *admin.Subscription) {
		s.RetryPolicy = &proto.RetryPolicy{MaxRetries: ptr(2), InitialDelayMs: ptr(int64(400)), BackoffMultiplier: ptr(1.0), MaxDelayMs: ptr(int64(1000))}
	})
	for sub, attempts := range map[string]int{naked: 3, parked: 2} {
		if rec := e.final(t, e.deliver(t, sub, e.event(), nil)); rec.Status != proto.DeliverySuccess || rec.Attempts != attempts {
			t.Fatalf("want SUCCESS at attempt %d, got %s", attempts, rec.Raw)
		}
	}
	e.idle(t)
	// Keyspace events arrive in order: anything the engine wrote comes
	// before this marker's.
	marker := store.TraceLinkKey("marker")
	if err := e.redis.Client.Set(ctx, marker, "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := watch.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("waiting for the marker's keyspace event: %v", err)
		}
		m, ok := msg.(*redis.Message)
		if !ok {
			continue
		}
		if m.Channel == "__keyspace@0__:"+marker {
			break
		}
		t.Errorf("with tracing off, %s on %s", m.Payload, m.Channel)
	}
}
