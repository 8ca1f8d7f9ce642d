package engine_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
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
