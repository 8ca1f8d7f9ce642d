package engine_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// limitOf is subscription sub's current adaptive limit, 0 when the engine
// does not list it among its busy subscriptions.
func limitOf(e *env, sub string) int {
	for _, l := range e.engine.Limits(100) {
		if l.SubscriptionID == sub {
			return l.Limit
		}
	}
	return 0
}

func TestLimits_AFastEndpointGrowsPastTheOldFixedCapWhileOverloadedAndBlackHoledOnesShrinkTowardOne(t *testing.T) {
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
	// 64 workers: the old fixed limit was a quarter of them, 16. The
	// webhook's 1s timeout makes the black hole's sends time out.
	e := newEnv(t, envOptions{handler: custom, timeout: time.Second, engine: func(c *engine.Config) { c.Workers = 64 }})
	defer close(release)
	overloaded, _, _ := e.subscribe(t, "/custom/overloaded", nil, nil)
	hole, _, _ := e.subscribe(t, "/custom/hole", nil, nil)
	for _, sub := range []string{overloaded, hole} {
		e.redis.Client.Del(context.Background(), store.SecretKey(sub))
	}
	fast, _, ep := e.subscribe(t, "/fast", receiver.Healthy(), nil)

	for range 300 {
		e.deliver(t, overloaded, e.event(), nil)
		e.deliver(t, hole, e.event(), nil)
	}
	const n = 3000
	ids := make([]string, 0, n)
	for range n {
		ids = append(ids, e.deliver(t, fast, e.event(), nil))
	}
	peak := 0
	lowOverloaded, lowHole := 1<<30, 1<<30
	deadline := time.Now().Add(2 * time.Minute)
	for ep.Stats().Unique < n || lowOverloaded > 2 || lowHole > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("after 2m: the fast endpoint got %d of %d deliveries; lowest limits seen: overloaded %d (want 2 at most: one request waiting is what it tolerates), black hole %d (want 1)",
				ep.Stats().Unique, n, lowOverloaded, lowHole)
		}
		peak = max(peak, limitOf(e, fast))
		if l := limitOf(e, overloaded); l > 0 {
			lowOverloaded = min(lowOverloaded, l)
		}
		if l := limitOf(e, hole); l > 0 {
			lowHole = min(lowHole, l)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if peak <= 16 {
		t.Errorf("the fast endpoint's limit peaked at %d; want it past the old fixed 16", peak)
	}
	for _, id := range ids[:100] {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("fast delivery %s: %s", id, rec.Raw)
		}
	}
}
