package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// successLedger coalesces subscription bookkeeping after successful sends.
// Writing last_success_at on every success would serialize every worker on
// one busy subscription's key (DESIGN decision 5), so a success whose
// subscription had no failures to reset only notes its time here, and a
// flusher writes each subscription at most once per SuccessFlush. (A reset
// of consecutive_failures is never coalesced: it is written atomically with
// the delivery's SUCCESS.)
type successLedger struct {
	e       *Engine
	mu      sync.Mutex
	pending map[string]time.Time // subscription id → latest success
	writes  atomic.Uint64        // subscription records written (or tried)
}

func newSuccessLedger(e *Engine) *successLedger {
	return &successLedger{e: e, pending: make(map[string]time.Time)}
}

func (l *successLedger) record(subscriptionID string, at time.Time) {
	l.mu.Lock()
	if prev, ok := l.pending[subscriptionID]; !ok || at.After(prev) {
		l.pending[subscriptionID] = at
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
		if ctx.Err() != nil {
			return
		}
		l.write(ctx, id, at)
	}
}

// write records a success's timestamps on the subscription. A failure
// counted after this success (by this or another replica) stands; one
// counted before it is reset, since this success ended that streak.
func (l *successLedger) write(ctx context.Context, id string, at time.Time) {
	l.writes.Add(1)
	_, err := l.e.store.UpdateSubscription(ctx, id, func(cur *proto.Subscription) (store.Patch, error) {
		var p store.Patch
		if cur.ConsecutiveFailures != 0 && cur.LastFailureAt != nil && cur.LastFailureAt.Before(at) {
			p = append(p, store.Field{Name: "consecutive_failures", Value: 0})
		}
		if cur.LastTriggeredAt == nil || cur.LastTriggeredAt.Before(at) {
			p = append(p, store.Field{Name: "last_triggered_at", Value: at})
		}
		if cur.LastSuccessAt == nil || cur.LastSuccessAt.Before(at) {
			p = append(p, store.Field{Name: "last_success_at", Value: at})
		}
		return p, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		l.e.log.Warn("cannot record subscription success", "subscription_id", id, "err", err)
	}
}

// saveDisabledEvent saves the webhook.disabled event after the write that
// disabled sub. Like the reference it is best effort: the status flip stands
// even if the event cannot be saved.
func (e *Engine) saveDisabledEvent(ctx context.Context, log *slog.Logger, sub *proto.Subscription, d *proto.Delivery, ev *proto.Event, now time.Time) {
	log.Warn("subscription auto-disabled after consecutive failures", "outcome", "auto_disabled", "disable_after_failures", sub.DisableAfter())
	traceID := d.TraceID
	if traceID == "" && ev != nil {
		traceID = ev.TraceID
	}
	de := proto.DisabledEvent{
		EventID:        proto.NewEventID(),
		TenantID:       sub.TenantID,
		SubscriptionID: d.SubscriptionID,
		DeliveryID:     d.DeliveryID,
		PreviousStatus: string(sub.Status),
		TraceID:        traceID,
		Timestamp:      now,
	}
	if ev != nil {
		de.RequestID = ev.RequestID
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if err := e.store.SaveEvent(wctx, de.JSON(), de.EventID, sub.TenantID, de.CorrelationID(), now, e.cfg.EventTTL); err != nil {
		log.Error("cannot save webhook.disabled event", "err", err)
	}
}

// SuccessWrites counts the subscription records the coalesced success
// bookkeeping wrote (or tried to): at most one per subscription per
// SuccessFlush, each a read and one compare-and-set script.
func (e *Engine) SuccessWrites() uint64 { return e.successes.writes.Load() }
