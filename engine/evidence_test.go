package engine_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/proto"
)

// failingEndpoint answers 500 until healthy is set, then 200, and counts
// the requests it gets.
type failingEndpoint struct {
	healthy  atomic.Bool
	requests atomic.Int64
}

func (f *failingEndpoint) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.requests.Add(1)
	if f.healthy.Load() {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusInternalServerError)
}

// The measurement, on a short timeline: an endpoint answering 500
// for a long while (many open periods of its breaker, doubling) while one
// delivery after another arrives with max_retries 0. Each must be FAILED by
// its own send, with the endpoint's answer to it, and by the end of its
// schedule (first attempt + one open period): never with the breaker's
// older answer to somebody else's send, never held past that end.
func TestBreaker_NoDeliveryIsFailedUnsentWhileTheEndpointStaysDown(t *testing.T) {
	t.Parallel()
	down := &failingEndpoint{}
	const openFor = 300 * time.Millisecond
	e := newEnv(t, envOptions{handler: down, engine: func(c *engine.Config) {
		c.Breaker = engine.BreakerConfig{Threshold: 3, OpenFor: openFor, MaxOpenFor: 5 * time.Second}
	}})
	sub, _, _ := e.subscribe(t, "/custom/down", nil, func(s *admin.Subscription) {
		s.RetryPolicy = fastPolicy(0)
		s.DisableAfterFailures = 10_000 // the breaker is under test, not auto-disable
	})
	var ids []string
	for range 40 { // one every 150 ms for 6 s: past the longest open period
		ids = append(ids, e.deliver(t, sub, e.event(), nil))
		time.Sleep(150 * time.Millisecond) // the arrival rate is the scenario
	}
	unsent, late := 0, 0
	for _, id := range ids {
		rec := e.final(t, id)
		d := rec.Delivery
		if d.Status != proto.DeliveryFailed || d.Attempts < 1 || d.ErrorMessage == nil || *d.ErrorMessage != "HTTP 500" {
			unsent++
			t.Errorf("%s ended %s after %d sends with %q; want FAILED by its own send, HTTP 500", id, d.Status, d.Attempts, deref(d.ErrorMessage))
			continue
		}
		// Its schedule ends one open period after its creation; the
		// message schedule's 250 ms tick and a send come on top.
		if took := d.CompletedAt.Sub(d.AttemptedAt.Time); took > openFor+2*time.Second {
			late++
			t.Errorf("%s was held %s before its send, past the end of its schedule (one open period, %s)", id, took.Round(time.Millisecond), openFor)
		}
	}
	sends := down.requests.Load()
	t.Logf("%d deliveries, %d sends, %d failed unsent, %d late", len(ids), sends, unsent, late)
	if sends > int64(len(ids))+10 {
		t.Errorf("%d sends for %d deliveries with no retries: the open breaker must hold the backlog back, not send it twice", sends, len(ids))
	}
	if s := e.subscription(t, sub); s.ConsecutiveFailures != len(ids) {
		t.Errorf("consecutive_failures = %d, want %d (one per failed delivery)", s.ConsecutiveFailures, len(ids))
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
