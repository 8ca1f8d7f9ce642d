package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

// Intake holds (bridge/park.go, docs/isolation.md "Waiting at intake").
// A work item that cannot go out now still cost its intake: its move, its
// store in JetStream, its fetch, its reads, its ack, and then its wake-up
// or held copy. For a subscription whose breaker is open, or whose sends
// hang at its in-flight limit, that is half a delivery per queued
// delivery, taken from every other subscription. So when this replica
// holds a never-sent delivery for an open breaker, or writes a busy
// put-off for a subscription whose sends stalled, it also writes the
// subscription's intake hold, and bridges leave its next never-sent
// deliveries in Redis until the hold ends. One write per hold period
// (store.IntakeHold.Until), not per delivery:
//
//   - the hold is written when this replica has none for the
//     subscription, or less than half of the one it wrote is left;
//   - each trip of the subscription's breaker (a failed probe) renews it to
//     the new open period's end;
//   - a success of a send to the subscription clears it, and bridges put
//     its parked deliveries back: whichever replica wrote it, since each
//     reads the holds once a second (run) and clears the ones it knows;
//   - otherwise it lapses: bridges probe with one parked delivery per poll
//     (which this replica holds again, renewing it, or sends), and drop it
//     after Grace.
//
// The hold's Span is what a never-sent delivery of the subscription has
// from its attempted_at to the end of its retry schedule (scheduleEnd, the
// stale cutoff if earlier): bridges put each parked delivery back by then,
// for its last-chance send.

// stallAfter is how long, at least, a subscription at its in-flight limit
// must have had no send end with an answer before its busy put-offs hold
// its intake (and four times its known latency: adaptive.Pool.Stalled): a
// black hole, not an endpoint that is merely slow, whose answers free a
// slot every latency / limit. Bridges move ids far faster than the engine
// sends them, so every millisecond of it is a few more of a black hole's
// deliveries queued rather than parked.
const stallAfter = 200 * time.Millisecond

type intakeHolds struct {
	e   *Engine
	mu  sync.Mutex
	set map[string]store.IntakeHold // the holds this replica wrote
	n   atomic.Int32                // len(set): the success path's fast check
}

func newIntakeHolds(e *Engine) *intakeHolds {
	return &intakeHolds{e: e, set: map[string]store.IntakeHold{}}
}

// hold writes (or renews) h's subscription's intake hold for reason until
// until, unless this replica's last write still has half of that left.
// The write is asynchronous: a hold only saves work, and the delivery at
// hand is settled as it would be without it.
func (ih *intakeHolds) hold(h *handling, reason string, until time.Time) {
	d := h.delivery()
	if d.Attempts != 0 || h.line != nil {
		return // bridges park only never-sent deliveries of unordered subscriptions
	}
	now := h.now
	span := ih.e.scheduleEnd(h)
	if stale := ih.e.staleAt(h); stale.Before(span) {
		span = stale
	}
	ih.write(d.SubscriptionID, reason, now, until, span.Sub(attemptedAt(d, now)), false)
}

// renew moves the end of sub's hold, if this replica knows of one (wrote
// it, or read it: run), to until (a trip of its breaker). Called with the breaker's lock held: it only
// takes its own lock and writes asynchronously.
func (ih *intakeHolds) renew(sub string, until time.Time) {
	if ih.n.Load() == 0 {
		return
	}
	ih.mu.Lock()
	cur, ok := ih.set[sub]
	ih.mu.Unlock()
	if ok {
		ih.write(sub, reasonBreakerOpen, time.Now(), until, cur.Span, true)
	}
}

func (ih *intakeHolds) write(sub, reason string, now, until time.Time, span time.Duration, force bool) {
	if ih.e.cfg.NoIntakeHolds || !until.After(now) || span <= 0 {
		return
	}
	ih.mu.Lock()
	cur, ok := ih.set[sub]
	if ok && !force && cur.Reason == reason && cur.Until.Sub(now) >= until.Sub(now)/2 {
		ih.mu.Unlock()
		return
	}
	next := store.IntakeHold{Reason: reason, Since: now, Until: until, Span: span,
		Grace: ih.e.cfg.AttemptTimeout + until.Sub(now)}
	if ok {
		next.Since = cur.Since
	}
	ih.set[sub] = next
	ih.n.Store(int32(len(ih.set)))
	ih.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ih.e.store.SetIntakeHold(ctx, sub, next); err != nil {
			ih.e.log.Warn("cannot write the intake hold of a subscription; its deliveries keep coming through the queue", "subscription_id", sub, "err", err)
			ih.forget(sub, next)
		}
	}()
}

// holdsRead is how often a replica reads the holds other replicas wrote,
// so that its own successes clear them too.
const holdsRead = time.Second

// run reads the holds every holdsRead until ctx is done and notes the
// ones this replica did not write (nor clear since): a success of one of
// its sends then clears them. One HGETALL a second.
func (ih *intakeHolds) run(ctx context.Context) {
	t := time.NewTicker(holdsRead)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		all, err := ih.e.store.IntakeHoldsAll(ctx)
		if err != nil {
			continue // its own holds still clear; others lapse
		}
		ih.mu.Lock()
		for sub, h := range all {
			if _, ok := ih.set[sub]; !ok {
				ih.set[sub] = h
			}
		}
		for sub := range ih.set {
			if _, ok := all[sub]; !ok {
				delete(ih.set, sub) // cleared or dropped elsewhere
			}
		}
		ih.n.Store(int32(len(ih.set)))
		ih.mu.Unlock()
	}
}

// succeeded clears sub's hold after a send to it succeeded.
func (ih *intakeHolds) succeeded(sub string) {
	if ih.n.Load() == 0 {
		return
	}
	ih.mu.Lock()
	cur, ok := ih.set[sub]
	ih.mu.Unlock()
	if !ok {
		return
	}
	ih.forget(sub, cur)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ih.e.store.ClearIntakeHold(ctx, sub); err != nil {
			// It lapses at its Until, and bridges probe then.
			ih.e.log.Warn("cannot clear the intake hold of a subscription that answered; its parked deliveries go back when it lapses", "subscription_id", sub, "err", err)
		}
	}()
}

// forget drops this replica's note of sub's hold if it is still h.
func (ih *intakeHolds) forget(sub string, h store.IntakeHold) {
	ih.mu.Lock()
	defer ih.mu.Unlock()
	if cur, ok := ih.set[sub]; ok && cur.Until.Equal(h.Until) && cur.Reason == h.Reason {
		delete(ih.set, sub)
		ih.n.Store(int32(len(ih.set)))
	}
}
