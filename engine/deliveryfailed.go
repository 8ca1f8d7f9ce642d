package engine

import (
	"context"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// deliveryFailedEvent is the system.webhook_delivery_failed event of a
// delivery that failed for good after o, its last send (upstream 0.1.25.21).
// Deliveries failed without a send (stale, SSRF-refused, …) have none, as
// upstream.
func (e *Engine) deliveryFailedEvent(d *proto.Delivery, sub *proto.Subscription, ev *proto.Event, o outcome, now time.Time) *store.NewEvent {
	fe := proto.DeliveryFailedEvent{
		SubscriptionID: d.SubscriptionID,
		DeliveryID:     d.DeliveryID,
		EventID:        d.EventID,
		EventType:      d.EventType,
		Attempts:       o.attempt,
		LastStatus:     o.res.StatusCode,
		Error:          o.message(),
		TraceID:        d.TraceID,
		Timestamp:      now,
	}
	if sub != nil {
		fe.TenantID = sub.TenantID
	}
	if ev != nil {
		fe.RequestID = ev.RequestID
		if fe.TraceID == "" {
			fe.TraceID = ev.TraceID
		}
	}
	return &store.NewEvent{Raw: fe.JSON(), EventID: fe.ID(), TenantID: proto.SystemTenant, CorrelationID: fe.CorrelationID(),
		Timestamp: now, TTL: e.cfg.EventTTL}
}

// writeAndSave is write that also saves ev in the same atomic write (nil:
// nothing to save), so the event exists exactly when the outcome does.
func (e *Engine) writeAndSave(ctx context.Context, rec *store.DeliveryRecord, subRaw []byte, ev *store.NewEvent, fn store.OutcomeFunc) (bool, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	return e.store.RecordOutcomeAndSave(wctx, rec, subRaw, fn, ev)
}
