package ops

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/reconcile"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Options configure a Tool. Redis is required; the rest may be zero.
type Options struct {
	// Redis is the Cycles Redis, read and written with run's settings.
	Redis redis.UniversalClient
	// JetStream reaches the dispatch stream. Nil means its state cannot be
	// read from here; JetStreamUnavailable then says why, in words an
	// operator can act on.
	JetStream            jetstream.JetStream
	JetStreamUnavailable string
	// Queue names the stream, subject and consumer (run's settings).
	Queue queue.Config
	// MaxDeliveryAge is run's MAX_DELIVERY_AGE_MS (default 24h): older
	// deliveries are failed without a send.
	MaxDeliveryAge time.Duration
	// ReconcileMargin is run's JETRELAY_RECONCILE_MARGIN (default 5m): a
	// delivery in no queue for longer than that past its due time is stuck.
	ReconcileMargin time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Ordering is run's JETRELAY_ORDERING, the fleet default ordering.
	Ordering proto.Ordering
}

// Tool runs operator commands against one Redis and one dispatch stream.
// It is safe for concurrent use.
type Tool struct {
	st     *store.Store
	admin  *admin.Writer
	js     jetstream.JetStream
	jsWhy  string
	q      queue.Config
	maxAge time.Duration
	margin time.Duration
	loc    *reconcile.Locator
	now    func() time.Time

	fleetOrdering proto.Ordering

	// recordRead, when set (tests), runs in Inspect after it read the
	// delivery's record and before it looks for the work item.
	recordRead func()
}

// New returns a Tool.
func New(o Options) *Tool {
	t := &Tool{
		st:     store.NewWithOptions(o.Redis, store.Options{}),
		admin:  admin.NewWriter(o.Redis, nil),
		js:     o.JetStream,
		jsWhy:  o.JetStreamUnavailable,
		q:      o.Queue.WithDefaults(),
		maxAge: o.MaxDeliveryAge,
		margin: o.ReconcileMargin,
		now:    o.Now,

		fleetOrdering: o.Ordering,
	}
	t.loc = reconcile.NewLocator(t.st, t.js, t.q, 0)
	if t.margin <= 0 {
		t.margin = reconcile.DefaultMargin
	}
	if t.maxAge <= 0 {
		t.maxAge = 24 * time.Hour
	}
	if t.now == nil {
		t.now = time.Now
	}
	if t.js == nil && t.jsWhy == "" {
		t.jsWhy = "no JetStream connection"
	}
	return t
}
