package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
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
	sub := h.delivery().SubscriptionID
	msg := queue.NewHeldMsg(e.cfg.Queue, sub, h.id, e.staleAt(h))
	span := e.startWaiting(h, msg, time.Time{})
	// The held copy, then the subscription's held-check: when the copy is
	// stored and the check is not, a redelivery of this item stores the
	// copy again (replacing it) and retries the check.
	noteErr, err := e.putOffNow(h, nil, reason, msg, queue.NewHeldCheckMsg(e.cfg.Queue, sub, e.nextHeldCheck(h.now)))
	endWaiting(span, errors.Join(noteErr, err))
	if settled, s := e.afterWrite(h, noteErr); settled {
		return s
	}
	if err != nil {
		return e.infraRetry(h, fmt.Errorf("hold delivery: %w", err))
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

// checkHeld handles a held-check of subscription subID; hdr is the
// check's headers (the breaker's probe time and interval, and the evidence
// of a success through it, breakerhold.go).
func (e *Engine) checkHeld(ctx context.Context, subID string, hdr nats.Header, handlings uint64) settlement {
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
	c := &heldCheck{now: now, active: active, evidence: headerTime(hdr, queue.EvidenceAtHeader)}
	if err == nil {
		// An operator's change (updated_at) or a success (last_success_at)
		// after a hold is evidence too, read at no extra cost.
		for _, t := range []*proto.Instant{rec.UpdatedAt, rec.LastSuccessAt} {
			if t != nil && t.After(c.evidence) {
				c.evidence = t.Time
			}
		}
	}
	probeAt, every, ok := probeHeaders(hdr)
	if !ok {
		probeAt, every = now, e.breakers.cfg.OpenFor
	}
	c.probe = active && !now.Before(probeAt)
	n, err := e.releaseHeld(ctx, subID, c)
	if n > 0 {
		log.Info("held deliveries released", "released", n, "subscription_active", active, "probe", c.probed)
	}
	if err != nil {
		d := e.infraDelay(handlings)
		log.Warn("releasing held deliveries failed; will look again", "err", err, "retry_in", d)
		return nakAfter(d)
	}
	if c.nextBy.IsZero() && !c.keptBreaker {
		return ack() // nothing held any more; the next hold schedules a check
	}
	switch {
	case c.released[queue.ReleasedEvidence] > 0:
		// Those held after the evidence are held by a breaker that opened
		// again: probe it afresh.
		probeAt, every = now.Add(e.breakers.cfg.OpenFor), e.breakers.cfg.OpenFor
	case c.probed:
		probeAt, every = now.Add(every), min(2*every, e.breakers.cfg.MaxOpenFor)
	}
	at := e.nextHeldCheck(now)
	if c.keptBreaker && active {
		at = probeAt
	}
	if !c.nextBy.IsZero() && c.nextBy.Before(at) {
		at = c.nextBy
	}
	if err := e.publishWaiting(ctx, breakerCheckMsg(e.cfg.Queue, subID, at, probeAt, every, time.Time{})); err != nil {
		log.Warn("cannot schedule the next held-check; will retry", "err", err)
		return nakAfter(e.infraDelay(handlings))
	}
	return ack()
}

// heldCheck decides, for one held-check, which held deliveries go.
type heldCheck struct {
	now    time.Time
	active bool // the subscription is ACTIVE (or gone)
	// evidence releases the deliveries a breaker held before it.
	evidence time.Time
	// probe: one breaker-held delivery is still to be released as the
	// probe; probed: it was.
	probe, probed bool

	released    map[string]int // by ReleasedHeader tag
	nextBy      time.Time      // earliest release-by of those kept
	keptBreaker bool           // a breaker-held delivery was kept
}

// decide says whether the held message m goes now, with the tag its work
// item carries (empty for a paused subscription's release), or else the
// time it must go by.
func (c *heldCheck) decide(m *jetstream.RawStreamMsg) (bool, string, time.Time) {
	// An unreadable time is treated as due: released, the engine decides
	// from the delivery's own record.
	by := headerTime(m.Header, queue.ReleaseByHeader)
	if by.IsZero() {
		by = headerTime(m.Header, queue.StaleAtHeader)
	}
	due := !c.now.Before(by)
	if m.Header.Get(queue.HeldReasonHeader) != queue.ReasonBreakerOpen {
		return c.active || due, "", by
	}
	switch {
	case due:
		return true, queue.ReleasedDue, by
	case !c.active:
		// Paused or disabled since it was held: released now, the engine
		// holds it again as the subscription's (its record then says so,
		// and it waits for the subscription, not for a breaker). The tag
		// keeps its record's next_retry_at from putting it off again.
		return true, queue.ReleasedInactive, by
	case !c.evidence.IsZero() && headerTime(m.Header, queue.HeldAtHeader).Before(c.evidence):
		return true, queue.ReleasedEvidence, by
	case c.probe:
		c.probe, c.probed = false, true
		return true, queue.ReleasedProbe, by
	}
	c.keptBreaker = true
	return false, "", by
}

// inactiveLookahead bounds how many held deliveries of an inactive
// subscription a held-check reads past the first one it keeps, looking for
// a breaker's held deliveries among them.
const inactiveLookahead = 256

// holdLookahead is how far past the first delivery it keeps a held-check
// keeps looking: held deliveries are in hold order, which is release-by
// order up to the disorder of parallel workers (breakerhold.go), so one
// that is due is found behind kept ones due within this much. It reads no
// more than the deliveries due that soon.
func (e *Engine) holdLookahead() time.Duration { return e.breakers.cfg.OpenFor }

// releaseHeld releases subID's held deliveries that c says go, in the
// order they were held. It stops at the first one it keeps that is not
// due within holdLookahead: hold order is close to release-by order
// (creation order for a paused subscription, breakerhold.go for a
// breaker's), so that finds all that are due; one held far out of order
// goes at the latest with the ones before it.
func (e *Engine) releaseHeld(ctx context.Context, subID string, c *heldCheck) (int, error) {
	st, err := e.dispatchStream(ctx)
	if err != nil {
		return 0, err
	}
	c.released = map[string]int{}
	filter := e.cfg.Queue.HeldSubjects(subID)
	horizon := c.now.Add(e.holdLookahead())
	n, beyond := 0, 0
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		seq = m.Sequence + 1
		release, tag, by := c.decide(m)
		if !release {
			if c.nextBy.IsZero() || by.Before(c.nextBy) {
				c.nextBy = by
			}
			if by.After(horizon) {
				// An inactive subscription's held deliveries wait for it
				// (their stale times are a day out). A breaker's held
				// before it turned inactive may sit among the first of
				// them (parallel workers holding both kinds as it
				// turned): look a bounded stretch further for those.
				if c.active || beyond >= inactiveLookahead {
					return n, nil
				}
				beyond++
			}
			continue
		}
		item := queue.NewRequeueMsg(e.cfg.Queue.Subject, string(m.Data), m.Sequence)
		if tp := m.Header.Get(traceparentHeader); tp != "" {
			// The held copy's producer span stays the parent of the
			// handling the release brings.
			item.Header.Set(traceparentHeader, tp)
		}
		if tag != "" {
			item.Header.Set(queue.ReleasedHeader, tag)
		}
		if tag == queue.ReleasedEvidence {
			item.Header.Set(queue.EvidenceAtHeader, c.evidence.UTC().Format(time.RFC3339Nano))
		}
		if err := e.publishWaiting(ctx, item); err != nil {
			return n, err
		}
		if err := st.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, err
		}
		c.released[tag]++
		n++
	}
}

// heldCheckAgain is the wake-up of a held-check that must be looked at again
// (its handling failed: Redis or JetStream unreachable). It keeps what the
// fired check carried — the probe time and interval, the evidence time —
// and its own subject (an evidence check stays on its own, so it does not
// replace the regular check): without them the retry would probe at once
// with the first interval, and an evidence check's release would be lost.
func (e *Engine) heldCheckAgain(fired jetstream.Msg, subID string, at time.Time) *nats.Msg {
	msg := queue.NewHeldCheckMsg(e.cfg.Queue, subID, at)
	for _, k := range []string{queue.ProbeAtHeader, queue.ProbeEveryHeader, queue.EvidenceAtHeader} {
		if v := fired.Headers().Get(k); v != "" {
			msg.Header.Set(k, v)
		}
	}
	if from := fired.Headers().Get(schedulerHeader); from == e.cfg.Queue.EvidenceCheckSubject(subID) {
		msg.Subject = from
	}
	return msg
}
