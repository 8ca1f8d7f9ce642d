package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/proto"
)

// disableCounter counts the auto-disabled metric; every other report is
// ignored.
type disableCounter struct{ n atomic.Int32 }

func (c *disableCounter) Sending(engine.Labels)           {}
func (c *disableCounter) Sent(engine.Labels, engine.Send) {}
func (c *disableCounter) PayloadInvalid(string, string)   {}
func (c *disableCounter) Decided(d engine.Decision) {
	if d.AutoDisabled {
		c.n.Add(1)
	}
}

// The acceptance case: an endpoint that always answers 503, admin's
// default retry policy (6 sends: 1, 2, 4, 8, 16 s apart), the default
// breaker, disable_after_failures 10 and 12 queued deliveries.
func TestAutoDisable_ADeadEndpointIsDisabledOnTheReferenceTimelineAndReleasedWhenReEnabled(t *testing.T) {
	t.Parallel()
	dead := &downEndpoint{}
	disabled := &disableCounter{}
	e := newEnv(t, envOptions{handler: dead, engine: func(c *engine.Config) {
		c.Breaker = engine.BreakerConfig{} // the defaults: 5 failures, open 5 s doubling
		c.Observer = disabled
	}})
	sub, _, _ := e.subscribe(t, "/custom/dead", nil, func(s *admin.Subscription) {
		s.RetryPolicy = nil // admin's default
		s.DisableAfterFailures = 10
	})
	var ids []string
	for range 12 {
		ids = append(ids, e.deliver(t, sub, e.event(), nil))
	}

	waitFor(t, 120*time.Second, "the dead subscription to be auto-disabled", func() bool {
		return e.subscription(t, sub).Status == proto.SubscriptionDisabled
	})
	disabledAt := time.Now()
	first := dead.sends()[0]
	if took := disabledAt.Sub(first); took > 90*time.Second {
		t.Errorf("auto-disabled %s after the first send, want within 90s (the reference takes about a minute)", took.Round(time.Second))
	}

	// Every delivery ends FAILED (its schedule ran out) or held for the
	// disabled subscription; none is left waiting on the breaker.
	var failed, held []string
	waitFor(t, 30*time.Second, "every delivery failed or held", func() bool {
		failed, held = nil, nil
		for _, id := range ids {
			rec, err := e.store.Delivery(context.Background(), id)
			switch {
			case err != nil:
				return false
			case rec.Status == proto.DeliveryFailed:
				failed = append(failed, id)
			case e.parked(id) && rec.Waiting != nil && *rec.Waiting == "subscription_disabled":
				held = append(held, id)
			}
		}
		return len(failed)+len(held) == len(ids)
	})
	if len(failed) < 10 {
		t.Errorf("%d deliveries FAILED, want at least 10 (their retry schedule ran out)", len(failed))
	}
	for _, id := range failed {
		rec, _ := e.store.Delivery(context.Background(), id)
		if msg := rec.ErrorMessage; msg == nil || *msg != "HTTP 503" {
			t.Errorf("%s failed with %v, want the endpoint's answer HTTP 503 (never expired)", id, msg)
		}
		if rec.Attempts < 1 {
			t.Errorf("%s FAILED without a send of its own: the breaker's answer to another delivery is stale evidence", id)
		}
	}
	s := e.subscription(t, sub)
	if s.ConsecutiveFailures != 10 {
		t.Errorf("consecutive_failures = %d, want it to stop at disable_after_failures (10)", s.ConsecutiveFailures)
	}
	if n := disabled.n.Load(); n != 1 {
		t.Errorf("auto-disabled counter incremented %d times, want 1", n)
	}
	if n := countEvents(t, e, "webhook.disabled"); n != 1 {
		t.Errorf("%d webhook.disabled events saved, want 1", n)
	}
	n := len(dead.sends())
	if n >= 12*6/2 {
		t.Errorf("%d sends to the dead endpoint, want far fewer than 12 × 6 = 72: the open breaker sends probes, not the backlog", n)
	}
	t.Logf("disabled %s after the first send; %d sends; %d failed, %d held", disabledAt.Sub(first).Round(100*time.Millisecond), n, len(failed), len(held))

	// The endpoint is fixed and an operator re-enables the subscription:
	// its breaker closes and the held deliveries go out within seconds.
	dead.healthy.Store(true)
	if err := e.admin.SetStatus(context.Background(), sub, proto.SubscriptionActive); err != nil {
		t.Fatal(err)
	}
	enabled := time.Now()
	for _, id := range held {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Errorf("held delivery %s ended %s after re-enable, want SUCCESS", id, rec.Status)
		}
	}
	if took := time.Since(enabled); took > 15*time.Second {
		t.Errorf("held deliveries took %s to go out after re-enable, want seconds", took.Round(time.Second))
	}
}

// countEvents counts the saved events of type eventType in the tenant's index.
func countEvents(t *testing.T, e *env, eventType string) int {
	t.Helper()
	ctx := context.Background()
	ids, err := e.redis.Client.ZRange(ctx, "events:"+e.tenant, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, id := range ids {
		raw, err := e.redis.Client.Get(ctx, "event:"+id).Result()
		if err == nil && strings.Contains(raw, `"event_type":"`+eventType+`"`) {
			n++
		}
	}
	return n
}

func TestHeld_ADeliveryHeldForAPausedSubscriptionFailsAtTheStaleCutoffWithTheReferenceMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{engine: func(c *engine.Config) { c.MaxDeliveryAge = 3 * time.Second }})
	sub, _, ep := e.subscribe(t, "/paused", nil, func(s *admin.Subscription) { s.Status = proto.SubscriptionPaused })
	id := e.deliver(t, sub, e.event(), nil)
	waitFor(t, 10*time.Second, "the delivery to be held", func() bool { return e.parked(id) })
	rec, err := e.store.Delivery(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Waiting == nil || *rec.Waiting != "subscription_paused" || rec.NextRetryAt != nil {
		t.Errorf("held record says waiting=%v next_retry_at=%v; want subscription_paused and no retry time (it waits for the subscription)", rec.Waiting, rec.NextRetryAt)
	}
	rec = e.final(t, id)
	if rec.Status != proto.DeliveryFailed || rec.ErrorMessage == nil || !strings.HasPrefix(*rec.ErrorMessage, "Delivery expired: ") {
		t.Fatalf("record = %s; want FAILED with the reference's Delivery expired message", rec.Raw)
	}
	if n := ep.Stats().Requests; n != 0 {
		t.Errorf("the paused subscription got %d sends", n)
	}
	if e.parked(id) {
		t.Errorf("the expired delivery is still held in JetStream")
	}
}
