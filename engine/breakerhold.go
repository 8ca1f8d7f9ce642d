package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sony/gobreaker/v2"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// Waiting for an open breaker costs O(1) per open period, not O(backlog)
// (DESIGN decision 9). A delivery that an open breaker refuses is held the
// way a paused subscription's deliveries are (held.go): one stored message
// on the subscription's held subjects, written once, with why it waits
// (breaker_open), since when (held-at) and until when at the latest
// (release-by: the earlier of its schedule end, when it gets its
// last-chance send, and the stale cutoff). The subscription's one
// held-check then decides for all of them at once, at the earliest of the
// next probe time and the first release-by, and each delivery is handled
// once more, when it is released:
//
//   - evidence that the endpoint is back (a send through the open breaker
//     that succeeded, an operator's change of the subscription, a success
//     recorded in last_success_at, after the hold) releases every delivery
//     held before it, tagged with the evidence's time so that whichever
//     replica takes one closes a breaker that opened before it;
//   - otherwise one delivery, the oldest, goes out as the breaker's probe
//     (through the open breaker, its failure not final), and the probe
//     interval doubles in the check's own headers up to MaxOpenFor;
//   - a delivery whose release-by has come is released for its last-chance
//     send (DESIGN decision 8: never held past its schedule end).
//
// Only deliveries never sent (attempts 0) are held in bulk. Release-by is
// creation time plus the subscription's schedule, so among them hold order
// is release-by order, up to the small disorder of parallel workers, which
// the check covers by looking past a kept delivery for as long as the
// next ones are due within one open period (holdLookahead). A delivery
// already sent once comes back at its retry times, and would be held
// behind younger ones with later release-bys: it keeps its own wake-up, as
// before. There are O(1) of them per open period (those sent before the
// breaker opened, and each probe), since the breaker lets nothing else out.
//
// A subscription at its in-flight limit is not held this way: the limit is
// per replica, so the wait ends when one of this replica's own sends to the
// subscription ends, a local event, within about a send's time. Its
// deliveries wait parked in memory in the subscription's wait line on this
// replica, unacked and kept alive, and a worker takes the next one when a
// send ends (busyline.go): no record write, no wake-up, no republish. Only
// past the line's bounds (per subscription, per replica, 5 s) is a
// delivery put off as a per-delivery wake-up (subscription_busy), as
// before.

// holdForBreaker holds a never-sent delivery while its subscription's
// breaker is open (see above).
func (e *Engine) holdForBreaker(h *handling) settlement {
	releaseBy := e.scheduleEnd(h)
	if stale := e.staleAt(h); stale.Before(releaseBy) {
		releaseBy = stale
	}
	sub := h.delivery().SubscriptionID
	msg := queue.NewBreakerHeldMsg(e.cfg.Queue, sub, h.id, releaseBy, h.now)
	span := e.startWaiting(h, msg, releaseBy)
	noteErr, err := e.putOffNow(h, &releaseBy, reasonBreakerOpen, msg)
	endWaiting(span, errors.Join(noteErr, err))
	if settled, s := e.afterWrite(h, noteErr); settled {
		return s
	}
	if err != nil {
		return e.infraRetry(h, fmt.Errorf("hold delivery for the breaker: %w", err))
	}
	if err := e.ensureBreakerCheck(h.ctx, sub, releaseBy, h.now); err != nil {
		// The held copy is stored; a redelivery of this item stores it
		// again (replacing it) and retries the check.
		return e.infraRetry(h, fmt.Errorf("schedule held-check: %w", err))
	}
	e.reportWait(h, reasonBreakerOpen, releaseBy)
	probeAt, _ := e.breakers.probeAt(sub, h.now)
	e.intake.hold(h, reasonBreakerOpen, probeAt)
	return ack()
}

// alreadyHeld settles a copy of a delivery whose record says it is held for
// its breaker: when the held copy is stored, this copy only makes sure the
// subscription's held-check is scheduled (the hold may have failed between
// the two) and is acked, so the delivery stays in one place. ok is false
// when no held copy is stored (the hold failed before it): the caller then
// handles the item as the delivery's only copy.
func (e *Engine) alreadyHeld(h *handling) (settlement, bool) {
	d := h.delivery()
	stream, err := e.dispatchStream(h.ctx)
	if err != nil {
		return e.infraRetry(h, fmt.Errorf("look for a held copy: %w", err)), true
	}
	w, err := e.cfg.Queue.FindWaiting(h.ctx, stream, d.SubscriptionID, h.id)
	switch {
	case err != nil:
		return e.infraRetry(h, fmt.Errorf("look for a held copy: %w", err)), true
	case !w.Held:
		return settlement{}, false
	}
	if err := e.ensureBreakerCheck(h.ctx, d.SubscriptionID, d.NextRetryAt.Time, h.now); err != nil {
		return e.infraRetry(h, fmt.Errorf("schedule held-check: %w", err)), true
	}
	h.log.Debug("delivery already held for its breaker; duplicate copy settled", "outcome", "duplicate")
	return ack(), true
}

// ensureBreakerCheck makes sure subscription sub's held-check fires by the
// breaker's next probe time and by releaseBy. A pending check that fires
// early enough is left alone (one read, no write): a backlog held in one
// open period publishes the check about once, and an immediate check a
// probe's success asked for is never pushed later by a hold.
func (e *Engine) ensureBreakerCheck(ctx context.Context, sub string, releaseBy, now time.Time) error {
	probeAt, every := e.breakers.probeAt(sub, now)
	at := probeAt
	if releaseBy.Before(at) {
		at = releaseBy
	}
	if pending, ok := e.pendingCheck(ctx, sub); ok {
		pat, ok := queue.ScheduledAt(pending.Header.Get(queue.ScheduleHeader))
		if ok && !pat.After(at) {
			return nil
		}
		if ok {
			// Keep the pending check's probe time and interval (it may
			// have doubled them); only make it fire sooner.
			if p, d, ok := probeHeaders(pending.Header); ok {
				probeAt, every = p, d
			}
		}
	}
	return e.publishWaiting(ctx, breakerCheckMsg(e.cfg.Queue, sub, at, probeAt, every, time.Time{}))
}

// pendingCheck reads subscription sub's pending held-check, if any, in a
// read that begins after the call, shared with the holds asking at the
// same time (checkreads.go).
func (e *Engine) pendingCheck(ctx context.Context, sub string) (*jetstream.RawStreamMsg, bool) {
	return e.checks.get(ctx, sub)
}

// readPendingCheck is one read of sub's pending held-check.
func (e *Engine) readPendingCheck(ctx context.Context, sub string) (*jetstream.RawStreamMsg, bool) {
	st, err := e.dispatchStream(ctx)
	if err != nil {
		return nil, false
	}
	m, err := st.GetLastMsgForSubject(ctx, e.cfg.Queue.HeldCheckSubject(sub))
	return m, err == nil
}

// breakerCheckMsg is a held-check at at that carries the breaker's probe
// time and interval, and the time of a success through the open breaker.
func breakerCheckMsg(c queue.Config, sub string, at, probeAt time.Time, every time.Duration, evidence time.Time) *nats.Msg {
	m := queue.NewHeldCheckMsg(c, sub, at)
	m.Header.Set(queue.ProbeAtHeader, probeAt.UTC().Format(time.RFC3339Nano))
	m.Header.Set(queue.ProbeEveryHeader, every.String())
	if !evidence.IsZero() {
		m.Header.Set(queue.EvidenceAtHeader, evidence.UTC().Format(time.RFC3339Nano))
	}
	return m
}

// probeHeaders reads a held-check's probe time and interval.
func probeHeaders(h nats.Header) (time.Time, time.Duration, bool) {
	at, err1 := time.Parse(time.RFC3339Nano, h.Get(queue.ProbeAtHeader))
	every, err2 := time.ParseDuration(h.Get(queue.ProbeEveryHeader))
	return at, every, err1 == nil && err2 == nil && every > 0
}

// headerTime reads an RFC3339 header (zero when absent or unreadable).
func headerTime(h nats.Header, name string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, h.Get(name))
	return t
}

// admitHandling asks for a send of h's delivery: a probe the held-check
// released goes through the open breaker (its failure is not final), a
// delivery whose schedule ended while the breaker held it gets its
// last-chance send, any other goes through admit.
func (e *Engine) admitHandling(h *handling) (*admission, putOffReason, bool) {
	ctx, sub := h.ctx, h.delivery().SubscriptionID
	end := e.scheduleEnd(h)
	switch h.msg.Headers().Get(queue.ReleasedHeader) {
	case queue.ReleasedProbe:
		return e.admitThrough(ctx, h, !h.now.Before(end))
	case queue.ReleasedDue:
		if !h.now.Before(end) {
			// Released at the end of its schedule: its one send is final
			// whatever this replica's breaker says, or a half-open breaker
			// would make it one more retry past that end.
			return e.admitThrough(ctx, h, true)
		}
	}
	adm, wait, ok := e.admit(ctx, sub, h.now)
	if ok && e.breakers.state(sub) == gobreaker.StateHalfOpen {
		// This replica's own probe: its success releases the held
		// backlog at once, as a held-check's probe does.
		done := adm.done
		adm.done = func(result error) {
			done(result)
			if result == nil {
				e.recovered(ctx, sub)
			}
		}
	}
	if !ok && wait.reason == reasonBreakerOpen {
		if !h.now.Before(end) {
			// Its schedule ended while the breaker held it: it gets its
			// one send now, and only its own answer can fail it.
			return e.admitThrough(ctx, h, true)
		} else if wait.until.After(end) {
			wait.until = end
		}
	}
	return adm, wait, ok
}

// admitThrough takes an in-flight slot for a send through subscription's
// open breaker: a probe, or a last-chance send (final). Either one's
// success is evidence that the endpoint is back: it closes this replica's
// breaker and asks for an immediate held-check that releases the
// subscription's held backlog.
func (e *Engine) admitThrough(ctx context.Context, h *handling, lastChance bool) (*admission, putOffReason, bool) {
	sub := h.delivery().SubscriptionID
	ok, back := e.inflight.acquire(ctx, sub)
	if !ok {
		return nil, putOffReason{back, reasonBusy}, false
	}
	closeBreaker := e.breakers.lastChance(sub)
	done := func(result error) {
		closeBreaker(result)
		if result == nil {
			e.recovered(ctx, sub)
		}
	}
	return &admission{e: e, sub: sub, done: done, result: errNotAttempted, lastChance: lastChance}, putOffReason{}, true
}

// recovered asks for an immediate held-check of sub carrying the evidence
// of a success through its open breaker.
func (e *Engine) recovered(ctx context.Context, sub string) {
	now := time.Now()
	msg := breakerCheckMsg(e.cfg.Queue, sub, now, now.Add(e.breakers.cfg.OpenFor), e.breakers.cfg.OpenFor, now)
	// On a subject of its own: the check that released the probe may be
	// scheduling its next one on the regular subject at this moment, and
	// would replace it.
	msg.Subject = e.cfg.Queue.EvidenceCheckSubject(sub)
	if err := e.publishWaiting(ctx, msg); err != nil {
		// The subscription's next held-check sees the success in its
		// last_success_at instead.
		e.log.Warn("cannot ask for the release of held deliveries after a success", "subscription_id", sub, "err", err)
	}
}

// releasedEvidence closes this replica's breaker of h's subscription when
// the held-check released h's delivery on evidence newer than the breaker.
func (e *Engine) releasedEvidence(h *handling) {
	if at := headerTime(h.msg.Headers(), queue.EvidenceAtHeader); !at.IsZero() {
		e.breakers.closeIfChanged(h.delivery().SubscriptionID, at)
	}
}
