package engine

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// handling is one handling of a work item: the message, the delivery's
// records and everything each decision about it needs, passed as one value.
// It lives for one call of process and is used by one worker only.
type handling struct {
	msg jetstream.Msg
	md  *jetstream.MsgMetadata
	id  string
	// ctx carries the handling's attempt span once it has started (a
	// per-call value, like an http.Request's context).
	ctx context.Context
	log handlingLog
	// logTraced: log already carries trace_id (attempt adds the outbound
	// one), so report must not add it a second time.
	logTraced bool
	now       time.Time // when the decisions of this handling were taken
	started   time.Time // when the handling began

	rec *store.DeliveryRecord
	b   *store.Bundle // nil until the event and subscription are loaded
	lab Labels

	line *line // the ordered line the item came from, nil for others (ordered.go)
	// item is the work item as the worker got it: what a park keeps
	// (busyline.go).
	item queued
}

// handlings is how often the work item has been handled, this handling
// included, across the wake-ups an outage scheduled for it (settle).
func (h *handling) handlings() uint64 { return queue.Waits(h.msg) + h.md.NumDelivered }

// waits is how long the work item waited before this handling began (0
// when not known: Send.Queued) and how long the handling has taken until
// now.
func (h *handling) waits(now time.Time) (queued, prepared time.Duration) {
	if h.md.NumDelivered == 1 {
		queued = max(h.started.Sub(h.md.Timestamp), 0)
	}
	return queued, now.Sub(h.started)
}

// delivery is the delivery as read at the start of the handling.
func (h *handling) delivery() *proto.Delivery { return h.rec.Delivery }

// sub is the subscription as loaded, nil before Load.
func (h *handling) sub() *proto.Subscription {
	if h.b == nil {
		return nil
	}
	return h.b.Subscription
}

// event is the event as loaded, nil before Load or when it is missing.
func (h *handling) event() *proto.Event {
	if h.b == nil {
		return nil
	}
	return h.b.Event
}

// staleAt is when the delivery reaches the stale cutoff: no wait may end
// after it, since the delivery must then be failed on time.
func (e *Engine) staleAt(h *handling) time.Time {
	return attemptedAt(h.delivery(), h.now).Add(e.cfg.MaxDeliveryAge + time.Second)
}

// settlement is what happens to a work item once its outcome is recorded.
type settlement struct {
	kind  settleKind
	delay time.Duration // for settleShortNak and settleLater
}

type settleKind int

const (
	settleAck      settleKind = iota // final state recorded (or nothing left to do)
	settleShortNak                   // a retry's short wait: delayed nak
	settleLater                      // handle again after delay, whatever the cause
	settleTerm                       // the work item itself is unusable
	settleLeave                      // another copy of the item settles it (settleLoser)
	settleParked                     // parked in its busy subscription's wait line (busyline.go)
)

func ack() settlement { return settlement{kind: settleAck} }

// nakAfter releases the item to be handled again after d, whatever the
// cause (Redis unreachable, a secret not stored yet, a panic): at once when
// d is 0, otherwise as a JetStream wake-up (settle).
func nakAfter(d time.Duration) settlement { return settlement{kind: settleLater, delay: d} }

// parkedInLine neither settles the item nor stops keeping it alive: it
// waits in its subscription's wait line for a slot.
func parkedInLine() settlement { return settlement{kind: settleParked} }

// leave neither acks nor naks the item: it is another copy's to settle.
func leave() settlement { return settlement{kind: settleLeave} }

// shortNak is a retry's wait of at most ParkAfter, which stays a delayed
// nak (see wait).
func shortNak(d time.Duration) settlement { return settlement{kind: settleShortNak, delay: d} }

// settle acks, naks or terms m as s says. It is the one place a wait is
// turned into JetStream state: no wait but a retry's short one may hold a
// MaxAckPending slot. A delayed release (nakAfter) is published as m's
// wake-up, the message wakeUp builds for its due time (one subject per
// delivery or held-check, so it replaces any earlier one), and m is acked
// once the wake-up is stored. Even a release of a second or two goes this
// way: unlike a retry's short nak, which a delivery takes once per attempt,
// these waits repeat for as long as their cause lasts (a Redis outage, a
// secret admin has not written yet), and thousands of items naked over and
// over would keep the consumer's slots busy for the whole of it. Nothing
// here writes Redis: Redis may be what is failing.
//
// handlings is how often the item has been handled, across earlier
// wake-ups; the wake-up carries it on so that infraDelay keeps growing.
func (e *Engine) settle(ctx context.Context, m jetstream.Msg, s settlement, handlings uint64, wakeUp func(at time.Time) *nats.Msg) {
	switch s.kind {
	case settleAck:
		_ = m.Ack()
	case settleShortNak:
		_ = m.NakWithDelay(s.delay)
	case settleTerm:
		_ = m.Term()
	case settleLeave:
	case settleLater:
		if s.delay <= 0 {
			_ = m.Nak()
			return
		}
		w := wakeUp(time.Now().Add(s.delay))
		w.Header.Set(queue.WaitsHeader, strconv.FormatUint(handlings, 10))
		for _, k := range []string{"traceparent", "tracestate"} {
			// The fired item continues the trace the waiting one was in.
			if v := m.Headers().Get(k); v != "" {
				w.Header.Set(k, v)
			}
		}
		if err := e.publishWaiting(ctx, w); err != nil {
			// JetStream cannot store the wake-up (NATS itself is in
			// trouble): a delayed nak is the only way left not to lose
			// the item, and holds its slot only while this lasts.
			e.log.Warn("cannot schedule a wake-up; releasing the work item with a delayed nak", "subject", w.Subject, "err", err, "retry_in", s.delay)
			_ = m.NakWithDelay(s.delay)
			return
		}
		_ = m.Ack()
	}
}
