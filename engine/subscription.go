package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// successLedger coalesces subscription bookkeeping after successful sends.
// Writing last_success_at on every success would serialize every worker on
// one busy subscription's key (DESIGN decision 5), so a success only notes
// its time here and a flusher writes each subscription at most once per
// SuccessFlush. A subscription with a failure count to reset is written at
// once: the reset must not wait.
type successLedger struct {
	e       *Engine
	mu      sync.Mutex
	pending map[string]time.Time // subscription id → latest success
}

func newSuccessLedger(e *Engine) *successLedger {
	return &successLedger{e: e, pending: make(map[string]time.Time)}
}

func (l *successLedger) record(ctx context.Context, sub *proto.Subscription, at time.Time) {
	if sub.ConsecutiveFailures != 0 {
		l.write(ctx, sub.SubscriptionID, at)
		return
	}
	l.mu.Lock()
	if prev, ok := l.pending[sub.SubscriptionID]; !ok || at.After(prev) {
		l.pending[sub.SubscriptionID] = at
	}
	l.mu.Unlock()
}

func (l *successLedger) run(ctx context.Context) {
	t := time.NewTicker(l.e.cfg.SuccessFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.flush(ctx)
		}
	}
}

func (l *successLedger) flush(ctx context.Context) {
	l.mu.Lock()
	batch := l.pending
	l.pending = make(map[string]time.Time, len(batch))
	l.mu.Unlock()
	for id, at := range batch {
		l.write(ctx, id, at)
	}
}

// write records a success on the subscription: timestamps, and a reset of
// consecutive_failures unless a failure was recorded after this success
// (by this or another replica), in which case the count stands.
func (l *successLedger) write(ctx context.Context, id string, at time.Time) {
	_, err := l.e.store.UpdateSubscription(ctx, id, func(cur *proto.Subscription) (store.Patch, error) {
		p := store.Patch{}
		if cur.ConsecutiveFailures != 0 && (cur.LastFailureAt == nil || !cur.LastFailureAt.After(at)) {
			p = append(p, store.Field{Name: "consecutive_failures", Value: 0})
		}
		if cur.LastTriggeredAt == nil || cur.LastTriggeredAt.Before(at) {
			p = append(p, store.Field{Name: "last_triggered_at", Value: at})
		}
		if cur.LastSuccessAt == nil || cur.LastSuccessAt.Before(at) {
			p = append(p, store.Field{Name: "last_success_at", Value: at})
		}
		if len(p) == 0 {
			return nil, nil
		}
		return p, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		l.e.log.Warn("cannot record subscription success", "subscription_id", id, "err", err)
	}
}

// countFailure adds one exhausted delivery to the subscription's
// consecutive_failures, exactly (compare-and-set, no lost increments), and
// disables the subscription when the count reaches disable_after_failures.
// The webhook.disabled event is saved only after the DISABLED write.
func (e *Engine) countFailure(ctx context.Context, log *slog.Logger, snapshot *proto.Subscription, d *proto.Delivery, ev *proto.Event, now time.Time) {
	var disabledFrom proto.SubscriptionStatus
	var tenant string
	_, err := e.store.UpdateSubscription(ctx, d.SubscriptionID, func(cur *proto.Subscription) (store.Patch, error) {
		disabledFrom, tenant = "", cur.TenantID
		failures := cur.ConsecutiveFailures + 1
		p := store.Patch{
			{Name: "consecutive_failures", Value: failures},
			{Name: "last_triggered_at", Value: now},
			{Name: "last_failure_at", Value: now},
		}
		if cur.Status == proto.SubscriptionActive && failures >= cur.DisableAfter() {
			disabledFrom = cur.Status
			p = append(p, store.Field{Name: "status", Value: proto.SubscriptionDisabled})
		}
		return p, nil
	})
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			log.Error("cannot count failure against subscription", "err", err)
		}
		return
	}
	if disabledFrom == "" {
		return
	}
	log.Warn("subscription auto-disabled after consecutive failures", "outcome", "auto_disabled", "disable_after_failures", snapshot.DisableAfter())
	traceID := d.TraceID
	if traceID == "" && ev != nil {
		traceID = ev.TraceID
	}
	de := proto.DisabledEvent{
		EventID:        proto.NewEventID(),
		TenantID:       tenant,
		SubscriptionID: d.SubscriptionID,
		DeliveryID:     d.DeliveryID,
		PreviousStatus: string(disabledFrom),
		TraceID:        traceID,
		Timestamp:      now,
	}
	if ev != nil {
		de.RequestID = ev.RequestID
	}
	// Best effort, as in the reference: the status flip stands even if the
	// event cannot be saved.
	if err := e.store.SaveEvent(ctx, de.JSON(), de.EventID, tenant, de.CorrelationID(), now, e.cfg.EventTTL); err != nil {
		log.Error("cannot save webhook.disabled event", "err", err)
	}
}
