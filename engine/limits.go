package engine

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jetrelay/jetrelay/internal/adaptive"
)

// inflight limits how many sends to one subscription a replica runs at
// once, adapting each limit to what the endpoint can take
// (internal/adaptive): a fast, healthy endpoint may use the whole pool, a
// slow, overloaded or black-holed one is cut toward one send and leaves
// workers to everyone else. A subscription at its limit that answers fast
// is waited for (a slot frees within milliseconds), a slow one makes the
// caller put the delivery off instead of tying up a worker.
type inflight struct {
	pool *adaptive.Pool
	// freed is told of every slot given back: the subscription's wait
	// line may hand its next delivery to a worker (busyline.go).
	freed func(id string)
}

// newInflight shares the pool w among the subscriptions. A new
// subscription starts at a quarter of the pool's floor (what the fixed
// limit was), not of its cap: its limit doubles every round trip while it
// is in use, and a black hole's first wave of timeouts stays small.
func newInflight(w *workers, bound int, fast time.Duration) *inflight {
	p := adaptive.NewPool(adaptive.PoolConfig{Workers: w.most, Max: bound, Initial: max(1, w.floor/4), FastAnswer: fast})
	p.SetWorkers(w.now())
	return &inflight{pool: p}
}

// acquire takes a send slot for subscription id, or says when the delivery
// should come back (adaptive.Pool.Acquire).
func (l *inflight) acquire(ctx context.Context, id string) (bool, time.Time) {
	return l.pool.Acquire(ctx, id)
}

// release returns a slot, teaching the subscription's limit what the send
// took and how it went: breakerResult's verdict (errNotAttempted: nothing
// was sent, errFailedAttempt: no answer or an overloaded one).
func (l *inflight) release(id string, took time.Duration, result error) {
	r := adaptive.Healthy
	switch {
	case errors.Is(result, errNotAttempted):
		r = adaptive.NotSent
	case result != nil:
		r = adaptive.Dropped
	}
	l.pool.Release(id, took, r)
	if l.freed != nil {
		l.freed(id)
	}
}

// SubscriptionLimit is one subscription's adaptive in-flight limit on this
// replica, as the operator view and the metrics show it.
type SubscriptionLimit struct {
	// SubscriptionID names the subscription.
	SubscriptionID string
	// Limit is how many sends to it this replica may run at once now. The
	// pool's sharing may hold a slow subscription below it while others
	// are busy.
	Limit int
	// InFlight is how many sends to it are running.
	InFlight int
	// Latency is its recent average send time, 0 before its first answer.
	Latency time.Duration
}

// recentlyBusy: a subscription sent to within this long counts as busy in
// Limits, so a scrape between two sends still sees it.
const recentlyBusy = 10 * time.Second

// Limits returns the adaptive limits of the subscriptions this replica
// sent to in the last ten seconds, busiest first (most sends running, then
// highest limit, then id): for the metrics and the operator's status
// (`jetrelay status`, the management port's /status). It walks every
// subscription the replica holds a limit for: call it per scrape or
// request, not per delivery.
func (e *Engine) Limits() []SubscriptionLimit {
	st := e.inflight.pool.Busiest(math.MaxInt, recentlyBusy)
	out := make([]SubscriptionLimit, len(st))
	for i, s := range st {
		out[i] = SubscriptionLimit{SubscriptionID: s.ID, Limit: s.Limit, InFlight: s.InFlight, Latency: s.Latency}
	}
	return out
}
