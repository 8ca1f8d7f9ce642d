package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

func TestBreaker_OpenBreakerDefersWithoutConsumingAttemptsAndAProbeRecovers(t *testing.T) {
	t.Parallel()
	h := &downEndpoint{}
	e := newEnv(t, envOptions{handler: h, engine: func(c *engine.Config) {
		c.Breaker = engine.BreakerConfig{Threshold: 3, OpenFor: 2 * time.Second}
	}})
	sub, _, _ := e.subscribe(t, "/custom/flapping", nil, func(s *admin.Subscription) { s.RetryPolicy = fastPolicy(10) })
	id := e.deliver(t, sub, e.event(), nil)

	waitFor(t, 10*time.Second, "three failed attempts to open the breaker", func() bool {
		r, err := e.store.Delivery(context.Background(), id)
		return err == nil && r.Attempts == 3
	})
	// The record tells the truth while the breaker holds it: why, until
	// when, and the endpoint's last answer.
	var held *store.DeliveryRecord
	waitFor(t, 10*time.Second, "the record to say the breaker holds it", func() bool {
		r, err := e.store.Delivery(context.Background(), id)
		held = r
		return err == nil && r.Waiting != nil && *r.Waiting == "breaker_open"
	})
	if held.NextRetryAt == nil || held.NextRetryAt.Before(time.Now().Add(-time.Second)) || held.ErrorMessage == nil || *held.ErrorMessage != "HTTP 503" {
		t.Errorf("held by the breaker, the record says %s; want next_retry_at ahead and error_message HTTP 503", held.Raw)
	}
	h.healthy.Store(true)
	rec := e.final(t, id)
	if rec.Status != proto.DeliverySuccess || rec.Attempts != 4 {
		t.Fatalf("record = %s; want SUCCESS on attempt 4: the open breaker must defer, not burn attempts", rec.Raw)
	}
	at := h.sends()
	if len(at) != 4 {
		t.Fatalf("%d sends, want 4", len(at))
	}
	if gap := at[3].Sub(at[2]); gap < 2*time.Second {
		t.Errorf("probe came %s after the third failure; the breaker should hold it for its open period (2s), not the 100ms retry delay", gap)
	}
}

func TestIsolation_BlackHoleHoldsAtMostItsInFlightLimitWhileOthersFlow(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var cur, peak atomic.Int32
	hole := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select { // accepts, never answers (until the test ends)
		case <-release:
		case <-r.Context().Done():
		}
		cur.Add(-1)
	})
	e := newEnv(t, envOptions{handler: hole, timeout: time.Minute, engine: func(c *engine.Config) {
		c.MaxInFlight = 2
		c.AttemptTimeout = time.Minute
	}})
	defer close(release)
	holeSub, _, _ := e.subscribe(t, "/custom/blackhole", nil, nil)
	okSub, _, ep := e.subscribe(t, "/healthy", receiver.Healthy(), nil)

	for range 200 {
		e.deliver(t, holeSub, e.event(), nil)
	}
	var ids []string
	for range 200 {
		ids = append(ids, e.deliver(t, okSub, e.event(), nil))
	}
	// Every healthy delivery completes while the black hole still holds its
	// requests: it never got more than its share of the 8 workers.
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("healthy delivery %s: %s", id, rec.Raw)
		}
	}
	if s := ep.Stats(); s.Unique != 200 || s.Duplicates != 0 {
		t.Errorf("healthy endpoint: %+v", s)
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("black hole held %d requests at once; the per-subscription limit is 2", p)
	}
	if cur.Load() == 0 {
		t.Error("the black hole holds nothing: the test did not exercise it")
	}
}

func TestScaleOut_ASendSlowerThanAckWaitIsKeptAliveAndNotSentTwice(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select { // answers after 3 AckWaits' worth of time
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	e := newEnv(t, envOptions{handler: slow, ackWait: time.Second, timeout: 10 * time.Second,
		engine: func(c *engine.Config) { c.AttemptTimeout = 10 * time.Second }})
	sub, _, _ := e.subscribe(t, "/custom/slow", nil, nil)
	rec := e.final(t, e.deliver(t, sub, e.event(), nil))
	if rec.Status != proto.DeliverySuccess || rec.Attempts != 1 {
		t.Fatalf("record = %s", rec.Raw)
	}
	e.idle(t)
	if n := requests.Load(); n != 1 {
		t.Errorf("the receiver got %d requests; in-progress acks must keep a slow send from being redelivered", n)
	}
}

func TestScaleOut_ADeliveryWaitingForAWorkerLongerThanAckWaitIsKeptAliveAndNotRedelivered(t *testing.T) {
	t.Parallel()
	// One worker, four slow receivers (1.5 s each, under AckWait): the
	// third delivery waits ~3 s for the worker, more than AckWait (2 s),
	// first in the consumer's hands and then in a lane.
	var requests sync.Map // path → *atomic.Int32
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := requests.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	e := newEnv(t, envOptions{handler: slow, ackWait: 2 * time.Second, timeout: 5 * time.Second,
		engine: func(c *engine.Config) { c.Workers, c.AttemptTimeout = 1, 5*time.Second }})
	var ids []string
	for i := range 4 {
		sub, _, _ := e.subscribe(t, fmt.Sprintf("/custom/slow-%d", i), nil, nil)
		ids = append(ids, e.deliver(t, sub, e.event(), nil))
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess || rec.Attempts != 1 {
			t.Errorf("record = %s", rec.Raw)
		}
	}
	e.idle(t)
	for i := range 4 {
		path := fmt.Sprintf("/custom/slow-%d", i)
		if n, ok := requests.Load(path); !ok || n.(*atomic.Int32).Load() != 1 {
			t.Errorf("%s got %v requests, want 1", path, n)
		}
	}
	// A redelivery would come back through the back lane.
	if w := e.engine.WorkStats(); w != (engine.WorkStats{New: 4}) {
		t.Errorf("work handed to the workers = %+v, want the 4 deliveries once each: an item must be kept alive while it waits for a worker", w)
	}
}

func TestScaleOut_ADeliveryFetchedAheadOfItsLaneLongerThanAckWaitIsKeptAliveAndNotRedelivered(t *testing.T) {
	t.Parallel()
	// Two workers, seven slow receivers (2.5 s each, over AckWait): two
	// deliveries are sent, two wait in the new lane, one waits for room in
	// it, and the last two are fetched ahead of all that and wait more than
	// AckWait (1 s) before the lane can take them.
	var requests sync.Map // path → *atomic.Int32
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := requests.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		select {
		case <-time.After(2500 * time.Millisecond):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	e := newEnv(t, envOptions{handler: slow, ackWait: time.Second, timeout: 5 * time.Second,
		engine: func(c *engine.Config) { c.Workers, c.AttemptTimeout = 2, 5*time.Second }})
	const n = 7
	var ids []string
	for i := range n {
		sub, _, _ := e.subscribe(t, fmt.Sprintf("/custom/ahead-%d", i), nil, nil)
		ids = append(ids, e.deliver(t, sub, e.event(), nil))
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess || rec.Attempts != 1 {
			t.Errorf("record = %s", rec.Raw)
		}
	}
	e.idle(t)
	for i := range n {
		path := fmt.Sprintf("/custom/ahead-%d", i)
		if c, ok := requests.Load(path); !ok || c.(*atomic.Int32).Load() != 1 {
			t.Errorf("%s got %v requests, want 1", path, c)
		}
	}
	if w := e.engine.WorkStats(); w != (engine.WorkStats{New: n}) {
		t.Errorf("work handed to the workers = %+v, want the %d deliveries once each: an item must be kept alive from the moment it is fetched", w, n)
	}
}
