package engine

import (
	"context"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// deliveryFailedEvent is the system.webhook_delivery_failed event of a
// delivery that failed for good after its sends (upstream 0.1.25.21):
// attempts sends were made, the last answered lastStatus (0: no answer) and
// msg is its error_message. Deliveries failed without a send (stale,
// SSRF-refused, …) have none, as upstream.
func (e *Engine) deliveryFailedEvent(h *handling, attempts, lastStatus int, msg string) *store.NewEvent {
	d, now := h.delivery(), time.Now()
	fe := proto.DeliveryFailedEvent{
		SubscriptionID: d.SubscriptionID,
		DeliveryID:     d.DeliveryID,
		EventID:        d.EventID,
		EventType:      d.EventType,
		Attempts:       attempts,
		LastStatus:     lastStatus,
		Error:          msg,
		TraceID:        d.TraceID,
		Timestamp:      now,
	}
	if sub := h.sub(); sub != nil {
		fe.TenantID = sub.TenantID
	}
	if ev := h.event(); ev != nil {
		fe.RequestID = ev.RequestID
		if fe.TraceID == "" {
			fe.TraceID = ev.TraceID
		}
	}
	return &store.NewEvent{Raw: fe.JSON(), EventID: fe.ID(), TenantID: proto.SystemTenant, CorrelationID: fe.CorrelationID(),
		Timestamp: now, TTL: e.cfg.EventTTL}
}

// writeAndSave records an outcome on a context that survives shutdown,
// bounded, and saves ev (nil: nothing to save) in the same atomic write, so
// the event exists exactly when the outcome does. subRaw is the
// subscription's stored bytes when the write may change it.
func (e *Engine) writeAndSave(h *handling, subRaw []byte, ev *store.NewEvent, fn store.OutcomeFunc) (bool, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), writeTimeout)
	defer cancel()
	return e.store.RecordOutcomeAndSave(wctx, h.rec, subRaw, fn, ev)
}
