package engine_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

func TestIntakeHold_ABacklogBehindAnOpenBreakerWaitsInRedisNotInTheQueueAndGoesOutWhenTheEndpointAnswers(t *testing.T) {
	t.Parallel()
	down := &downEndpoint{}
	// A first open period of 5 s: the hold lasts while the backlog is
	// parked (past it, bridges let one out a second as a probe), even on a
	// machine running the race-enabled suite.
	e := newEnv(t, envOptions{handler: down, engine: func(c *engine.Config) {
		c.Breaker = engine.BreakerConfig{Threshold: 3, OpenFor: 5 * time.Second, MaxOpenFor: 16 * time.Second}
	}})
	sub := openBreaker(t, e, down, slowPolicy())
	// One never-sent delivery held for the breaker writes the hold.
	first := e.deliver(t, sub, e.event(), nil)
	var hold store.IntakeHold
	waitFor(t, 10*time.Second, "the subscription's intake hold", func() bool {
		h, ok, err := e.store.IntakeHoldOf(context.Background(), sub)
		hold = h
		return err == nil && ok
	})
	if hold.Reason != "breaker_open" || !hold.Until.After(hold.Since) || hold.Span <= 0 {
		t.Fatalf("hold = %+v; want breaker_open with an end and the schedule's span", hold)
	}

	probes := awaitParking(t, e, sub)
	before := handled(e.engine)
	const backlog = 200
	ids := make([]string, backlog)
	for i := range ids {
		ids[i] = e.deliver(t, sub, e.event(), nil)
	}
	waitFor(t, 20*time.Second, "the backlog parked", func() bool { return e.parkedCount(t, sub) >= backlog })
	// Parked, not queued: the engine handled a few work items (those the
	// bridge moved before it read the hold, and probes), not the backlog.
	if n := handled(e.engine) - before; n > 40 {
		t.Errorf("the engine handled %d work items for a backlog of %d behind an open breaker; want the backlog left in Redis", n, backlog)
	}
	// Each parked record says why and until when it waits: the end of
	// its schedule, when it is back for its last-chance send at the latest.
	for _, id := range ids {
		rec, err := e.store.Delivery(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		at, parked, err := e.store.ParkedAt(context.Background(), sub, id)
		if err != nil {
			t.Fatal(err)
		}
		if !parked {
			continue
		}
		want := rec.AttemptedAt.Add(hold.Span)
		if rec.Waiting == nil || *rec.Waiting != "breaker_open" || rec.NextRetryAt == nil || !rec.NextRetryAt.Equal(at) || at.Sub(want).Abs() > time.Millisecond || rec.Attempts != 0 {
			t.Errorf("parked record = %s, due %s; want jetrelay_waiting breaker_open, next_retry_at at its schedule's end (%s), no attempt", rec.Raw, at, want)
		}
	}

	// The endpoint recovers: a probe's success clears the hold, and the
	// whole backlog goes out, once each.
	down.healthy.Store(true)
	waitFor(t, 30*time.Second, "the parked backlog delivered", func() bool { return e.heldCount(t, sub) == 0 })
	for _, id := range append(append(ids, first), probes...) {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("record = %s; want SUCCESS once the endpoint is back", rec.Raw)
		}
	}
	if _, ok, _ := e.store.IntakeHoldOf(context.Background(), sub); ok {
		t.Errorf("the intake hold is still there after the endpoint answered")
	}
}

// awaitParking delivers to sub, one at a time, until the bridge parks one:
// it reads the holds every 25 ms, so the first deliveries after a hold is
// written may still go through the queue. It returns what it delivered.
func awaitParking(t *testing.T, e *env, sub string) []string {
	t.Helper()
	var sent []string
	for range 50 {
		sent = append(sent, e.deliver(t, sub, e.event(), nil))
		deadline := time.Now().Add(500 * time.Millisecond)
		for time.Now().Before(deadline) {
			if e.parkedCount(t, sub) > 0 {
				return sent
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Fatalf("the bridge parked none of %d deliveries sent after the intake hold was written", len(sent))
	return nil
}

func TestIntakeHold_DeliveriesOfAnEndpointWhoseSendsHangWaitInRedis(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	hole := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	e := newEnv(t, envOptions{handler: hole, timeout: time.Minute, engine: func(c *engine.Config) {
		c.AttemptTimeout = 2 * time.Minute
	}})
	// After the env's: cleanups run last first, and the receiver's Close
	// waits for the hanging requests.
	t.Cleanup(func() { close(hang) })
	sub, _, _ := e.subscribe(t, "/custom/hole", nil, func(s *admin.Subscription) {
		s.RetryPolicy = slowPolicy()
		s.DisableAfterFailures = 10_000
	})
	const backlog = 400
	for range backlog {
		e.deliver(t, sub, e.event(), nil)
	}
	var hold store.IntakeHold
	waitFor(t, 30*time.Second, "an intake hold for the stalled subscription", func() bool {
		h, ok, err := e.store.IntakeHoldOf(context.Background(), sub)
		hold = h
		return err == nil && ok
	})
	if hold.Reason != "subscription_busy" {
		t.Errorf("hold = %+v; want subscription_busy (its sends hang; its breaker has seen no failure)", hold)
	}
	// The next ones wait in Redis, not as wake-ups in the queue.
	awaitParking(t, e, sub)
	before := e.parkedCount(t, sub)
	for range 100 {
		e.deliver(t, sub, e.event(), nil)
	}
	waitFor(t, 10*time.Second, "the new deliveries parked", func() bool { return e.parkedCount(t, sub) >= before+100 })
}

func TestIntakeHold_AnotherReplicasSuccessClearsAHoldItDidNotWrite(t *testing.T) {
	t.Parallel()
	down := &downEndpoint{}
	e := newEnv(t, envOptions{handler: down, engine: func(c *engine.Config) {
		c.Breaker = engine.BreakerConfig{Threshold: 3, OpenFor: time.Second, MaxOpenFor: time.Second}
		c.AttemptTimeout = 2 * time.Minute // the hold's grace: longer than the test
	}})
	sub := openBreaker(t, e, down, slowPolicy())
	e.deliver(t, sub, e.event(), nil) // held for the breaker: the hold is written
	waitFor(t, 10*time.Second, "the subscription's intake hold", func() bool {
		_, ok, err := e.store.IntakeHoldOf(context.Background(), sub)
		return err == nil && ok
	})
	// The replica that wrote it goes away; its grace (the longest a send
	// may take, here 2 min, plus a period) is far longer than this test
	// waits.
	e.stopEngine()
	ids := awaitParking(t, e, sub)
	parked := e.parkedCount(t, sub)
	for range 20 {
		ids = append(ids, e.deliver(t, sub, e.event(), nil))
	}
	waitFor(t, 10*time.Second, "the deliveries parked", func() bool { return e.parkedCount(t, sub) >= parked+20 })

	// Another replica, which never saw the endpoint fail, sends the probe
	// the bridge lets out once the hold's end passed: its success clears
	// the hold, and the rest goes out at the bridge's next poll.
	down.healthy.Store(true)
	other := e.newEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = other.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, 15*time.Second, "every parked delivery delivered", func() bool {
		for _, id := range ids {
			rec, err := e.store.Delivery(context.Background(), id)
			if err != nil || rec.Status != proto.DeliverySuccess {
				return false
			}
		}
		return true
	})
	if _, ok, _ := e.store.IntakeHoldOf(context.Background(), sub); ok {
		t.Errorf("the intake hold is still there after another replica's success")
	}
}
