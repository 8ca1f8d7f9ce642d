package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Not parallel: the pool grows only while this process's CPU is not
// saturated, and other tests' load would hold it back.
func TestWorkers_SlowButHealthyReceiversGetMoreSendsInFlightThanTheFloorWithinTheCap(t *testing.T) {
	// 200 subscriptions whose endpoints take 200 ms however many requests
	// they get, as webhooks over the internet do. A fixed pool of 64
	// workers runs at most 64 sends at once; the elastic pool grows past
	// its floor of 64, never past its cap, and shrinks back once the
	// backlog is gone.
	const (
		subs    = 200
		perSub  = 8
		floor   = 64
		ceiling = 512
	)
	var answered, running, peakRunning atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for p := peakRunning.Load(); n > p && !peakRunning.CompareAndSwap(p, n); p = peakRunning.Load() {
		}
		time.Sleep(200 * time.Millisecond)
		running.Add(-1)
		w.WriteHeader(http.StatusOK)
		answered.Add(1)
	})
	e := newEnv(t, envOptions{handler: h, engine: func(c *engine.Config) {
		c.Workers, c.MinWorkers = ceiling, floor
	}})
	if s := e.engine.PoolStats(); s.Workers != floor || s.Min != floor || s.Max != ceiling {
		t.Fatalf("before any work the pool is %+v, want %d workers between %d and %d", s, floor, floor, ceiling)
	}
	ids := make([]string, 0, subs)
	for i := range subs {
		sub, _, _ := e.subscribe(t, fmt.Sprintf("/custom/slow-%d", i), nil, nil)
		ids = append(ids, sub)
	}
	for range perSub {
		for _, sub := range ids {
			e.deliver(t, sub, e.event(), nil)
		}
	}
	peakPool := 0
	deadline := time.Now().Add(2 * time.Minute)
	for answered.Load() < subs*perSub {
		if time.Now().After(deadline) {
			t.Fatalf("after 2m the endpoints answered %d of %d deliveries (at most %d at once, pool peaked at %d)",
				answered.Load(), subs*perSub, peakRunning.Load(), peakPool)
		}
		peakPool = max(peakPool, e.engine.PoolStats().Workers)
		time.Sleep(5 * time.Millisecond)
	}
	if peakRunning.Load() <= floor {
		t.Errorf("the endpoints got at most %d requests at once (pool peaked at %d); want more than the %d a fixed pool of the floor allows",
			peakRunning.Load(), peakPool, floor)
	}
	if peakRunning.Load() > ceiling || peakPool > ceiling {
		t.Errorf("the endpoints got up to %d requests at once and the pool reached %d workers; the cap is %d", peakRunning.Load(), peakPool, ceiling)
	}
	waitFor(t, 30*time.Second, "the pool to shrink back to its floor once the backlog is gone", func() bool {
		return e.engine.PoolStats().Workers == floor
	})
}

func TestWorkers_AFastReceiverIsServedByTheFloor(t *testing.T) {
	// A receiver that answers at once frees its worker within moments: no
	// work is held back for want of workers beyond what the CPU drives, so
	// the pool has no reason to grow toward its cap.
	var answered atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		answered.Add(1)
	})
	const floor, ceiling, n = 16, 1024, 1000
	e := newEnv(t, envOptions{handler: h, engine: func(c *engine.Config) {
		c.Workers, c.MinWorkers = ceiling, floor
	}})
	sub, _, _ := e.subscribe(t, "/custom/fast", nil, nil)
	for range n {
		e.deliver(t, sub, e.event(), nil)
	}
	peakPool := 0
	waitFor(t, time.Minute, "every delivery to be answered", func() bool {
		peakPool = max(peakPool, e.engine.PoolStats().Workers)
		return answered.Load() >= n
	})
	t.Logf("pool peaked at %d workers for one fast receiver", peakPool)
	// The fast endpoint's adaptive limit bounds what the pool may grow to
	// (its limit, a quarter more, and the floor): far below the cap.
	if peakPool > ceiling/4 {
		t.Errorf("the pool grew to %d workers for one fast receiver; want it near its floor of %d, far below the cap %d", peakPool, floor, ceiling)
	}
}

func TestWorkers_AFastBacklogAcrossManySubscriptionsIsServedByTheFloor(t *testing.T) {
	// Ten subscriptions whose receiver answers at once, with a backlog
	// queued before the engine starts. Their adaptive limits grow into the
	// hundreds together, and work always waits in the lanes, but the
	// workers spend their time on this replica's own work (reads, outcome
	// writes, the CPU), not waiting on receivers: more of them would only
	// queue beside the others, so the pool stays within four times its
	// floor. Before the pool measured its sends, it grew to 118-256 workers
	// here (and to 1,000 on the benchmark's queued case, 530 of them
	// queued for their outcome writes).
	const (
		subs, perSub   = 10, 400
		floor, ceiling = 16, 1024
	)
	var answered atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		answered.Add(1)
	})
	e := newEnv(t, envOptions{handler: h, engine: func(c *engine.Config) {
		c.Workers, c.MinWorkers = ceiling, floor
	}})
	e.stopEngine()
	ctx := context.Background()
	var ids []string
	for i := range subs {
		sub, _, _ := e.subscribe(t, fmt.Sprintf("/custom/fast-%d", i), nil, nil)
		for range perSub {
			ids = append(ids, e.deliver(t, sub, e.event(), nil))
		}
	}
	waitFor(t, 30*time.Second, "the bridge to move every id into the stream", func() bool {
		n, _ := e.redis.Client.LLen(ctx, store.PendingList).Result()
		m, _ := e.redis.Client.LLen(ctx, "dispatch:processing:test-bridge").Result()
		return n == 0 && m == 0
	})
	eng := e.newEngine(t)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := eng.Run(rctx); err != nil {
			t.Errorf("engine.Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	peakPool := 0
	waitFor(t, time.Minute, "every delivery to be answered", func() bool {
		peakPool = max(peakPool, eng.PoolStats().Workers)
		return answered.Load() >= subs*perSub
	})
	t.Logf("pool peaked at %d workers for a backlog of %d across %d fast subscriptions", peakPool, subs*perSub, subs)
	if peakPool > 4*floor {
		t.Errorf("the pool grew to %d workers for fast receivers; want at most four times its floor of %d", peakPool, floor)
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("delivery %s ended %s, want SUCCESS", id, rec.Status)
		}
	}
}
