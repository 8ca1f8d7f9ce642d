package engine_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/proto"
)

// limitOf is subscription sub's current adaptive limit, 0 when the engine
// does not list it among its busy subscriptions.
func limitOf(e *env, sub string) int {
	for _, l := range e.engine.Limits() {
		if l.SubscriptionID == sub {
			return l.Limit
		}
	}
	return 0
}

// Not parallel: the other tests' load would be latency the limiter rightly
// reacts to, and the endpoint must stay healthy.
func TestLimits_AHealthyEndpointWithABacklogGrowsPastTheOldFixedCap(t *testing.T) {
	// It answers in 80 ms however many requests it gets: a backlog keeps
	// rate × 80 ms sends running (Little's law), more than 16 — the old
	// fixed limit, a quarter of these 64 workers — as soon as the rate
	// passes 200/s.
	var answered, running, peakRunning atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for p := peakRunning.Load(); n > p && !peakRunning.CompareAndSwap(p, n); p = peakRunning.Load() {
		}
		time.Sleep(80 * time.Millisecond) // the endpoint's service time
		running.Add(-1)
		w.WriteHeader(http.StatusOK)
		answered.Add(1)
	})
	e := newEnv(t, envOptions{handler: h, engine: func(c *engine.Config) { c.Workers = 64 }})
	sub, _, _ := e.subscribe(t, "/custom/healthy", nil, nil)
	const n = 2000
	for range n {
		e.deliver(t, sub, e.event(), nil)
	}
	peak := 0
	deadline := time.Now().Add(2 * time.Minute)
	for answered.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("after 2m the endpoint answered %d of %d deliveries (limit peaked at %d)", answered.Load(), n, peak)
		}
		peak = max(peak, limitOf(e, sub))
		time.Sleep(5 * time.Millisecond)
	}
	if peak <= 16 || peakRunning.Load() <= 16 {
		t.Errorf("limit peaked at %d, the endpoint at %d requests at once; want both past the old fixed 16", peak, peakRunning.Load())
	}
}

func TestLimits_OverloadedAndBlackHoledEndpointsShrinkTowardOneWhileAHealthyOneCompletes(t *testing.T) {
	t.Parallel()
	// overloaded serves one request at a time, so its latency grows with
	// every request sent to it at once; hole accepts and never answers.
	var serial sync.Mutex
	release := make(chan struct{})
	custom := http.NewServeMux()
	custom.HandleFunc("/custom/overloaded", func(w http.ResponseWriter, r *http.Request) {
		serial.Lock()
		defer serial.Unlock()
		time.Sleep(20 * time.Millisecond) // the endpoint's service time
		w.WriteHeader(http.StatusOK)
	})
	custom.HandleFunc("/custom/hole", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	// 64 workers; the webhook's 1s timeout makes the black hole's sends
	// time out.
	e := newEnv(t, envOptions{handler: custom, timeout: time.Second, engine: func(c *engine.Config) { c.Workers = 64 }})
	defer close(release)
	overloaded, _, _ := e.subscribe(t, "/custom/overloaded", nil, nil)
	hole, _, _ := e.subscribe(t, "/custom/hole", nil, nil)
	healthy, _, ep := e.subscribe(t, "/healthy", receiver.Healthy(), nil)
	for range 300 {
		e.deliver(t, overloaded, e.event(), nil)
		e.deliver(t, hole, e.event(), nil)
	}
	var ids []string
	for range 500 {
		ids = append(ids, e.deliver(t, healthy, e.event(), nil))
	}
	lowOverloaded, lowHole := 1<<30, 1<<30
	deadline := time.Now().Add(2 * time.Minute)
	for ep.Stats().Unique < len(ids) || lowOverloaded > 2 || lowHole > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("after 2m: the healthy endpoint got %d of %d deliveries; lowest limits seen: overloaded %d (want 2 at most: one request waiting is what it tolerates), black hole %d (want 1)",
				ep.Stats().Unique, len(ids), lowOverloaded, lowHole)
		}
		if l := limitOf(e, overloaded); l > 0 {
			lowOverloaded = min(lowOverloaded, l)
		}
		if l := limitOf(e, hole); l > 0 {
			lowHole = min(lowHole, l)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("healthy delivery %s: %s", id, rec.Raw)
		}
	}
}
