package bridge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Ordered subscriptions (docs/ordering.md). Their deliveries go to their
// own line (queue.OrderedSubject) in dispatch:pending order. Two things
// keep that order through the bridges:
//
//   - Routing: the subscription of each id comes from the delivery records
//     the bridge's move reads with the ids anyway (store.TraceOrigin), and
//     whether it is ordered from the jetrelay:ordering index plus the fleet
//     default, read whole about once a second.
//   - One mover: bridges moving batches from dispatch:pending at the same
//     time would publish them interleaved (bridge B's later batch stored
//     before A's earlier one). While ordering is in use, the bridge that
//     holds the mover lease (store.MoverLease) moves; the others keep their
//     other duties (recovery, adoption, legacy promotion) and try for the
//     lease every moverRetry. The lease is per bridge, not per send or per
//     delivery: one bridge moves batches of BatchSize in a pipelined round
//     trip and publishes them asynchronously, far more than the fleet
//     delivers. A new holder first adopts the processing list of the
//     bridge that held the lease before (it may have died mid-batch): those
//     ids are older than anything still in dispatch:pending.

// Mover lease timing: a dead mover stops intake for at most moverTTL.
const (
	moverTTL   = 5 * time.Second
	moverRetry = time.Second
	// orderingRefresh is how stale the ordering index may be: a
	// subscription switched to ordered is routed to its line within it.
	orderingRefresh = time.Second
)

// routing caches the ordering index.
type routing struct {
	mu     sync.Mutex
	modes  map[string]proto.Ordering
	readAt time.Time
	// renewAt is when this bridge renews the mover lease it holds; zero
	// while it does not hold it.
	renewAt time.Time
}

// orderingInUse reports whether any subscription may be ordered, reading
// the index when the cached copy is older than orderingRefresh. A read
// that fails keeps the last copy.
func (b *Bridge) orderingInUse(ctx context.Context) bool {
	r := &b.routes
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.readAt) >= orderingRefresh {
		if m, err := b.store.Orderings(ctx); err == nil {
			r.modes, r.readAt = m, time.Now()
		} else {
			b.log.Warn("cannot read the ordering index; keeping the last one", "err", err)
		}
	}
	if b.cfg.Ordering.Ordered() {
		return true
	}
	for _, m := range r.modes {
		if m.Ordered() {
			return true
		}
	}
	return false
}

// ordered reports whether subscriptionID's deliveries go to its line.
func (b *Bridge) ordered(subscriptionID string) bool {
	if subscriptionID == "" {
		return false
	}
	b.routes.mu.Lock()
	m, ok := b.routes.modes[subscriptionID]
	b.routes.mu.Unlock()
	if !ok {
		m = b.cfg.Ordering
	}
	return m.Ordered()
}

// subjects is, for each id, its subscription's line when that is ordered,
// "" (the shared work subject) otherwise; nil when none is ordered.
func (b *Bridge) subjects(ids []string, origins []store.TraceOrigin) []string {
	if origins == nil {
		return nil
	}
	var out []string
	for i := range ids {
		if sub := origins[i].SubscriptionID; b.ordered(sub) {
			if out == nil {
				out = make([]string, len(ids))
			}
			out[i] = b.cfg.Queue.OrderedSubject(sub)
		}
	}
	return out
}

// takeTurn reports whether this bridge may move ids now: always while no
// subscription is ordered, otherwise only while it holds the mover lease.
// adopted is true when it just took the lease over and moved the previous
// holder's processing list into its own: the caller drains it first.
func (b *Bridge) takeTurn(ctx context.Context) (ok, adopted bool) {
	if !b.orderingInUse(ctx) {
		b.routes.renewAt = time.Time{}
		return true, false
	}
	if now := time.Now(); now.Before(b.routes.renewAt) {
		return true, false
	}
	held, last, err := b.store.TakeMover(ctx, b.cfg.InstanceID, moverTTL)
	if err != nil {
		b.log.Warn("cannot take the mover lease", "err", err)
		return false, false
	}
	if !held {
		b.routes.renewAt = time.Time{}
		return false, false
	}
	b.routes.renewAt = time.Now().Add(moverTTL / 3)
	if last == "" || last == b.cfg.InstanceID {
		return true, false
	}
	if err := b.removePublished(ctx); err != nil {
		b.log.Warn("cannot adopt the previous mover's processing list before this one's published ids are removed", "err", err)
		return false, false
	}
	n, err := b.adoptList(ctx, store.ProcessingList(last), "")
	if err != nil {
		b.log.Warn("cannot adopt the previous mover's processing list", "previous", last, "err", err)
		return false, false
	}
	b.log.Info("took over moving from dispatch:pending", "previous", last, "adopted", n)
	return true, n > 0
}

// dropTurn gives the mover lease up on shutdown.
func (b *Bridge) dropTurn(ctx context.Context) {
	if b.routes.renewAt.IsZero() {
		return
	}
	if err := b.store.DropMover(ctx, b.cfg.InstanceID); err != nil {
		b.log.Warn("mover lease not dropped; it expires on its own", "err", err)
	}
}

// workItem is one id to publish: its trace parent (nil when tracing is
// off), its route (the records its delivery names, queue.SetRoute) and,
// bound for an ordered subscription's line, that line's subject ("" for
// the shared work subject).
type workItem struct {
	id      string
	parent  context.Context
	route   queue.Route
	subject string
	back    bool // published from the parked ones (queue.UnparkedHeader)
}

// items makes the work items of ids from what their delivery records say
// (origins, nil when they could not be read) and separates those bound for
// ordered lines (lines) from the others (plain), keeping each group's order.
func (b *Bridge) items(ids []string, origins []store.TraceOrigin) (plain, lines []workItem) {
	parents, subjects := b.traceParents(ids, origins), b.subjects(ids, origins)
	plain = make([]workItem, 0, len(ids))
	for i, id := range ids {
		it := workItem{id: id}
		if parents != nil {
			it.parent = parents[i]
		}
		if origins != nil {
			it.route = queue.Route{SubscriptionID: origins[i].SubscriptionID, EventID: origins[i].EventID}
		}
		if subjects != nil && subjects[i] != "" {
			it.subject = subjects[i]
			lines = append(lines, it)
			continue
		}
		plain = append(plain, it)
	}
	return plain, lines
}

// publishLines publishes the ids of each ordered line one after another,
// each once the previous one's PubAck came back, and the lines side by side.
// An async batch could store a later id of a line while an earlier one
// fails (a stream leader changing, a stream not created yet) and is
// published again after it, out of order; here a failure stops its line, and
// that id and the ones after it stay in the processing list, in order, for
// the next attempt. Results are in the order of items.
func (b *Bridge) publishLines(items []workItem) (stored []string, dups []duplicate, failed []string, firstErr error) {
	if len(items) == 0 {
		return nil, nil, nil, nil
	}
	deadline := time.Now().Add(b.cfg.PublishTimeout)
	bySubject := map[string][]int{}
	for i, it := range items {
		bySubject[it.subject] = append(bySubject[it.subject], i)
	}
	type result struct {
		ack *jetstream.PubAck
		err error
	}
	results := make([]result, len(items))
	var wg sync.WaitGroup
	for _, idx := range bySubject {
		wg.Go(func() {
			var stop error
			for _, i := range idx {
				if stop != nil {
					results[i].err = stop
					continue
				}
				results[i].ack, results[i].err = b.publishOne(items[i], deadline)
				stop = results[i].err
			}
		})
	}
	wg.Wait()
	for i, r := range results {
		switch {
		case r.err != nil:
			failed = append(failed, items[i].id)
			if firstErr == nil {
				firstErr = r.err
			}
		case r.ack.Duplicate:
			dups = append(dups, duplicate{id: items[i].id, seq: r.ack.Sequence})
		default:
			stored = append(stored, items[i].id)
			b.published.Add(1)
		}
	}
	return stored, dups, failed, firstErr
}

// publishOne publishes one line item and waits for its PubAck until deadline.
func (b *Bridge) publishOne(it workItem, deadline time.Time) (*jetstream.PubAck, error) {
	msg := queue.NewMsg(it.subject, it.id)
	queue.SetRoute(msg, it.route)
	var span trace.Span
	if it.parent != nil && b.tracer != nil {
		span = b.startPublish(it.parent, msg, it.id)
	}
	paf, err := b.publishAsync(msg, deadline)
	if span != nil {
		endPublish(span, err)
	}
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", it.id, err)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case ack := <-paf.Ok():
		return ack, nil
	case err := <-paf.Err():
		return nil, err
	case <-timer.C:
		return nil, errPubAckTimeout
	}
}
