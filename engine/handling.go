package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	log *slog.Logger
	now time.Time // when the decisions of this handling were taken

	rec *store.DeliveryRecord
	b   *store.Bundle // nil until the event and subscription are loaded
	lab Labels
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
	delay time.Duration // for nak
}

type settleKind int

const (
	settleAck  settleKind = iota // final state recorded (or nothing left to do)
	settleNak                    // redeliver after delay
	settleTerm                   // the work item itself is unusable
)

func ack() settlement                     { return settlement{kind: settleAck} }
func nakAfter(d time.Duration) settlement { return settlement{kind: settleNak, delay: d} }

// settle acks, naks or terms m as s says.
func settle(m jetstream.Msg, s settlement) {
	switch s.kind {
	case settleAck:
		_ = m.Ack()
	case settleNak:
		_ = m.NakWithDelay(s.delay)
	case settleTerm:
		_ = m.Term()
	}
}
