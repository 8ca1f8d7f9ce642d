package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Waiting at intake (docs/isolation.md). An engine that finds a
// subscription unable to take deliveries (its breaker open, or its sends
// hanging at its in-flight limit) writes an intake hold for it
// (store.IntakeHold). While the hold lasts, the bridge parks the
// subscription's never-sent deliveries in Redis instead of publishing
// them: each then costs its share of a move and one ZADD, not a work item
// stored, fetched, read, decided, written back and stored again as a
// wake-up or a held copy. A black hole's backlog no longer takes the
// machine from everyone else.
//
// Parking never keeps a delivery from its schedule. Each parked id is
// scored with the latest time it must be handled (its attempted_at plus
// the hold's Span: the end of its retry schedule, or its stale cutoff),
// and the bridge's poll (unpark) publishes it then, as work that comes
// back (the engine takes new work first), for its last-chance send: a
// dead endpoint is still failed and auto-disabled on the reference's
// timeline.
// The rest go back when the hold ends:
//
//   - an engine that sees a success (or an operator's change) clears the
//     hold: everything parked goes back at the next poll;
//   - an engine renews the hold at every trip of the breaker and every
//     written busy put-off, so it lasts while the endpoint stays down;
//   - once its Until has passed, one parked id goes back per poll: the
//     engine sends it as its breaker's probe (or holds it again, renewing
//     the hold), so a subscription whose engines stopped renewing is
//     probed and not left waiting;
//   - past Until + Grace (no engine renewed it: the endpoint is back, or
//     the engines that held it are gone), the hold is dropped and
//     everything goes back.
//
// Only deliveries never sent (attempts 0, status PENDING) of unordered
// subscriptions are parked: a retry keeps its own wake-up, and an ordered
// line keeps its order in its own subject. A delivery an operator
// requeued since the hold began is not parked either: a redrive is fresh
// evidence that closes the breakers that opened before it (docs/operations.md).

// holdsRefresh is how stale a bridge's copy of the intake holds may be:
// the ids of a newly held subscription moved within it still go out (at a
// full drain's rate, a couple of hundred). One HGETALL of a hash of a few
// entries each time: a fortieth of a round trip per millisecond.
const holdsRefresh = 25 * time.Millisecond

// unparkPerPoll bounds how many parked deliveries of one subscription a
// bridge publishes per poll (a second): a hold cleared over a backlog of
// tens of thousands hands the engine a thousand a second, not all of them
// at once, where a burst would hold up the healthy work fetched with it
// (a new endpoint answering in 5 s looks stalled until its first answer,
// and its first success releases what was parked meanwhile).
const unparkPerPoll = 1000

// holding caches the intake holds.
type holding struct {
	mu     sync.Mutex
	holds  map[string]store.IntakeHold
	readAt time.Time
}

// currentHolds returns the holds, reading them when the copy is older than
// holdsRefresh. A read that fails keeps the last copy.
func (b *Bridge) currentHolds(ctx context.Context) map[string]store.IntakeHold {
	h := &b.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.readAt) >= holdsRefresh {
		if m, err := b.store.IntakeHoldsAll(ctx); err == nil {
			h.holds, h.readAt = m, time.Now()
		} else {
			b.log.Warn("cannot read the intake holds; keeping the last copy", "err", err)
			h.readAt = time.Now()
		}
	}
	return h.holds
}

// park parks the ids among ids whose subscription is under an intake hold
// and returns the others with their origins, and the parked ids. When the
// origins are unknown or parking fails, nothing is parked: publishing is
// the lossless side to err on.
func (b *Bridge) park(ctx context.Context, ids []string, origins []store.TraceOrigin) (rest []string, restOrigins []store.TraceOrigin, parked []string) {
	if origins == nil || len(ids) == 0 {
		return ids, origins, nil
	}
	holds := b.currentHolds(ctx)
	if len(holds) == 0 {
		return ids, origins, nil
	}
	now := time.Now()
	var toPark []store.ParkedID
	for i, id := range ids {
		o := origins[i]
		h, ok := holds[o.SubscriptionID]
		if !ok || !now.Before(h.Until.Add(h.Grace)) || b.ordered(o.SubscriptionID) {
			continue
		}
		f := o.ParkFields()
		if f.Attempts != 0 || f.Status != string(proto.DeliveryPending) {
			continue
		}
		created, err := proto.ParseInstant(f.AttemptedAt)
		if err != nil {
			continue
		}
		if f.RequeuedAt != "" {
			// An operator's redrive is fresh evidence (the engine closes
			// an older breaker on it): one made since the hold began goes
			// to the engine.
			if at, err := proto.ParseInstant(f.RequeuedAt); err != nil || !at.Before(h.Since) {
				continue
			}
		}
		due := created.Add(h.Span)
		if !due.After(now.Add(time.Second)) {
			continue // due now: the engine gives it its send
		}
		toPark = append(toPark, store.ParkedID{ID: id, SubID: o.SubscriptionID, Reason: h.Reason, Raw: o.Raw, DueMs: due.UnixMilli()})
	}
	if len(toPark) == 0 {
		return ids, origins, nil
	}
	parked, err := b.store.Park(ctx, toPark)
	if err != nil {
		// Those of its subscriptions parked before the error stay parked;
		// the rest are published.
		b.log.Warn("cannot park deliveries of held subscriptions; publishing them", "ids", len(toPark)-len(parked), "err", err)
	}
	if len(parked) == 0 {
		return ids, origins, nil
	}
	done := make(map[string]bool, len(parked))
	for _, id := range parked {
		done[id] = true
	}
	rest, restOrigins = make([]string, 0, len(ids)-len(parked)), make([]store.TraceOrigin, 0, len(ids)-len(parked))
	for i, id := range ids {
		if !done[id] {
			rest, restOrigins = append(rest, id), append(restOrigins, origins[i])
		}
	}
	b.parked.Add(uint64(len(parked)))
	return rest, restOrigins, parked
}

// unpark publishes parked ids (republish): every id whose time
// has come, one id of a subscription whose hold has passed its Until (a
// probe), and everything of a subscription whose hold is gone or has
// passed Until + Grace (that hold is dropped). Any bridge may run it at
// any time: two publishing the same ids make duplicates JetStream absorbs
// (the msg id is the delivery id). A subscription that fails is retried at
// the next poll; the others go on.
func (b *Bridge) unpark(ctx context.Context) error {
	subs, err := b.store.ParkedSubs(ctx)
	if err != nil || len(subs) == 0 {
		return err
	}
	holds, err := b.store.IntakeHoldsAll(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	// The dispatch loop parks by this copy from now on: what goes back
	// below is not parked again on an older one.
	b.holds.mu.Lock()
	b.holds.holds, b.holds.readAt = holds, now
	b.holds.mu.Unlock()
	var errs []error
	for _, sub := range subs {
		if err := b.unparkSub(ctx, sub, holds, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unparkSub is unpark for one subscription.
func (b *Bridge) unparkSub(ctx context.Context, sub string, holds map[string]store.IntakeHold, now time.Time) error {
	h, held := holds[sub]
	if held && !now.Before(h.Until.Add(h.Grace)) {
		if err := b.store.ClearIntakeHold(ctx, sub); err != nil {
			return err
		}
		b.log.Info("intake hold not renewed in time; publishing its parked deliveries", "subscription_id", sub, "reason", h.Reason, "since", h.Since)
		held = false
	}
	if err := b.unparkScored(ctx, sub, strconv.FormatInt(now.UnixMilli(), 10), unparkPerPoll); err != nil {
		return err
	}
	switch {
	case !held:
		return b.unparkScored(ctx, sub, "+inf", unparkPerPoll)
	case !now.Before(h.Until):
		return b.probe(ctx, sub)
	}
	return nil
}

// probe publishes sub's oldest parked delivery as a work item of its own:
// the engine sends it as its breaker's probe, or holds it again and renews
// the hold.
func (b *Bridge) probe(ctx context.Context, sub string) error {
	_, err := b.republish(ctx, sub, "+inf", 1)
	return err
}

// unparkScored publishes sub's parked ids scored up to maxScore, up to
// limit of them, a batch at a time.
func (b *Bridge) unparkScored(ctx context.Context, sub, maxScore string, limit int) error {
	batch := min(b.cfg.RetryBatchSize, limit)
	for moved := 0; moved < limit; {
		n, err := b.republish(ctx, sub, maxScore, batch)
		moved += n
		if err != nil || n < batch {
			return err
		}
	}
	return nil
}

// republish publishes up to n of sub's parked ids scored up to maxScore
// straight into JetStream, their wait notes taken off first, marked as
// work that comes back (queue.UnparkedHeader: the engine takes new work
// first), and then removes them from the parked ones. Not through
// dispatch:pending: a backlog put back there would hold up every delivery
// queued behind it for as long as the bridges take to move it, and those
// of a subscription still held would be parked again. A crash between the
// publish and the removal publishes them again at the next poll, as
// duplicates JetStream absorbs (or the engine settles). It returns how
// many it took from the parked ones.
func (b *Bridge) republish(ctx context.Context, sub, maxScore string, n int) (int, error) {
	ids, err := b.store.ParkedDue(ctx, sub, maxScore, n)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	if err := b.store.Unwait(ctx, ids); err != nil {
		return 0, err
	}
	plain, lines := b.items(ids, b.readOrigins(ctx, ids))
	plain = append(plain, lines...)
	for i := range plain {
		plain[i].subject = "" // parked deliveries are never ordered ones
		plain[i].back = true
	}
	stored, dups, _, err := b.publish(plain)
	out := stored
	for _, d := range dups {
		out = append(out, d.id)
	}
	if rerr := b.store.Unpark(ctx, sub, out); rerr != nil {
		return 0, rerr
	}
	b.unparked.Add(uint64(len(out)))
	if err == nil && len(out) < len(ids) {
		err = fmt.Errorf("%d of %d parked deliveries of %s not published", len(ids)-len(out), len(ids), sub)
	}
	return len(out), err
}
