package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Deliveries of a PAUSED or DISABLED subscription wait for an event (the
// subscription becoming ACTIVE again), not a time. They are held as
// ordinary stored messages on queue.HeldSubject (disk, ~100 bytes each; a
// message schedule per held delivery would cost ~0.8 KB of server heap, and
// a subscription paused for a day may hold millions). Each subscription that
// holds deliveries has one pending held-check, a message schedule that
// fires every InactiveRecheck: the engine that gets it reads the
// subscription once, and releases every held delivery when it is ACTIVE (or
// gone: the deliveries are then failed as the reference does), or only
// those past the stale cutoff while it stays inactive. A release republishes
// the delivery as a work item and deletes its held copy after the PubAck,
// under a Nats-Msg-Id derived from the held copy's sequence, so a release
// repeated after a crash is absorbed by the dedupe window.

// traceparentHeader is the W3C trace context header as startWaiting writes it.
const traceparentHeader = "traceparent"

// hold keeps the delivery until its subscription is ACTIVE again.
func (e *Engine) hold(h *handling, reason string) settlement {
	if s, ok := e.holdInLine(h, reason); ok {
		return s
	}
	if settled, s := e.afterWrite(h, e.noteWait(h, nil, reason)); settled {
		return s
	}
	sub := h.delivery().SubscriptionID
	msg := queue.NewHeldMsg(e.cfg.Queue, sub, h.id, e.staleAt(h))
	span := e.startWaiting(h, msg, time.Time{})
	err := e.publishWaiting(h.ctx, msg)
	endWaiting(span, err)
	if err != nil {
		return e.infraRetry(h, fmt.Errorf("hold delivery: %w", err))
	}
	if err := e.publishWaiting(h.ctx, queue.NewHeldCheckMsg(e.cfg.Queue, sub, e.nextHeldCheck(h.now))); err != nil {
		// The held copy is stored; a redelivery of this item stores it
		// again (replacing it) and retries the check.
		return e.infraRetry(h, fmt.Errorf("schedule held-check: %w", err))
	}
	e.reportWait(h, reason, time.Time{})
	return ack()
}

// nextHeldCheck is the end of the InactiveRecheck period now is in. Every
// hold in the same period schedules the same time, so a busy paused
// subscription does not keep pushing its check later.
func (e *Engine) nextHeldCheck(now time.Time) time.Time {
	return now.Truncate(e.cfg.InactiveRecheck).Add(e.cfg.InactiveRecheck)
}

// checkHeld handles a held-check of subscription subID.
func (e *Engine) checkHeld(ctx context.Context, subID string, handlings uint64) settlement {
	log := e.log.With("subscription_id", subID)
	rec, err := e.store.Subscription(ctx, subID)
	// A subscription that is gone (or unreadable) releases everything: the
	// engine then fails each delivery as the reference does.
	active := err != nil || rec.Status == proto.SubscriptionActive
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) {
		d := e.infraDelay(handlings)
		log.Warn("cannot read a subscription with held deliveries; will look again", "err", err, "retry_in", d)
		return nakAfter(d)
	}
	now := time.Now()
	n, next, err := e.releaseHeld(ctx, subID, func(staleAt time.Time) bool { return active || !now.Before(staleAt) })
	if n > 0 {
		log.Info("held deliveries released", "released", n, "subscription_active", active)
	}
	if err != nil {
		d := e.infraDelay(handlings)
		log.Warn("releasing held deliveries failed; will look again", "err", err, "retry_in", d)
		return nakAfter(d)
	}
	if next.IsZero() {
		return ack() // nothing held any more; the next hold schedules a check
	}
	at := e.nextHeldCheck(now)
	if next.Before(at) {
		at = next
	}
	if err := e.publishWaiting(ctx, queue.NewHeldCheckMsg(e.cfg.Queue, subID, at)); err != nil {
		log.Warn("cannot schedule the next held-check; will retry", "err", err)
		return nakAfter(e.infraDelay(handlings))
	}
	return ack()
}

// releaseHeld releases subID's held deliveries, in the order they were held,
// for as long as release says so of the next one's stale time. It returns
// how many it released and the stale time of the first one it kept (zero
// when none is left). Held deliveries are in hold order, which is close to
// creation order, so stopping at the first one still held finds nearly all
// that are stale; one held out of order goes at the latest with the ones
// before it, or when the subscription is re-enabled.
func (e *Engine) releaseHeld(ctx context.Context, subID string, release func(staleAt time.Time) bool) (int, time.Time, error) {
	st, err := e.js.Stream(ctx, e.cfg.Queue.Stream)
	if err != nil {
		return 0, time.Time{}, err
	}
	filter := e.cfg.Queue.HeldSubjects(subID)
	n := 0
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, time.Time{}, nil
		}
		if err != nil {
			return n, time.Time{}, err
		}
		// An unreadable stale time is treated as stale: released, the
		// engine decides from the delivery's own record.
		staleAt, _ := time.Parse(time.RFC3339Nano, m.Header.Get(queue.StaleAtHeader))
		if !release(staleAt) {
			return n, staleAt, nil
		}
		item := queue.NewRequeueMsg(e.cfg.Queue.Subject, string(m.Data), m.Sequence)
		if tp := m.Header.Get(traceparentHeader); tp != "" {
			// The held copy's producer span stays the parent of the
			// handling the release brings.
			item.Header.Set(traceparentHeader, tp)
		}
		if err := e.publishWaiting(ctx, item); err != nil {
			return n, time.Time{}, err
		}
		if err := st.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, time.Time{}, err
		}
		n++
		seq = m.Sequence + 1
	}
}
