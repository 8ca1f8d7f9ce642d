package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
)

// deferredBatch bounds one promotion round, so that a large set of
// deliveries falling due at once (a breaker that parked thousands) enters the
// stream in slices interleaved with new work instead of as one wall.
const deferredBatch = 500

// deferredLoop brings deliveries the engine parked in jetrelay:deferred back
// into the stream when they fall due. Each is published under
// DeferredMsgID(id, due), so a promotion repeated after a crash (published,
// not yet removed from the ZSET) is absorbed by the dedupe window, and
// removed from the ZSET only after its PubAck, and only if it was not parked
// again meanwhile. Several bridges may run it at once: they publish the same
// msg ids.
func (b *Bridge) deferredLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.DeferredPoll)
	defer t.Stop()
	failing := false
	for {
		n, err := b.promoteDeferred(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			b.log.Warn("bringing back deferred deliveries failed; retrying every poll", "err", err)
			failing = true
		case err == nil && failing:
			b.log.Info("bringing back deferred deliveries works again")
			failing = false
		}
		if err == nil && n == deferredBatch {
			continue // more are due: go on without waiting a tick
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// promoteDeferred publishes one batch of due deferred deliveries and returns
// how many were due. With tracing on, each publish has its span in the
// delivery's trace (startPromotion), as a publish from dispatch:pending has.
func (b *Bridge) promoteDeferred(ctx context.Context) (int, error) {
	due, err := b.store.DueDeferred(ctx, time.Now(), deferredBatch)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	deadline := time.Now().Add(b.cfg.PublishTimeout)
	parents := b.promotionParents(ctx, due, deadline)
	futures := make([]jetstream.PubAckFuture, len(due))
	var errs []error
	for i, d := range due {
		if err := queue.ValidateDeliveryID(d.ID); err != nil {
			continue // cannot be published; forgotten below, never sent
		}
		msg := queue.NewDeferredMsg(b.cfg.Queue.Subject, d.ID, d.DueMillis)
		var span trace.Span
		if parents != nil {
			span = b.startPromotion(parents[i], msg, d)
		}
		futures[i], err = b.publishDeferred(msg, deadline)
		if span != nil {
			endPublish(span, err)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	done := make([]store.Deferred, 0, len(due))
	for i, f := range futures {
		if f == nil {
			if queue.ValidateDeliveryID(due[i].ID) != nil {
				b.log.Error("malformed id in jetrelay:deferred dropped", "delivery_id", preview(due[i].ID))
				done = append(done, due[i])
			}
			continue
		}
		select {
		case <-f.Ok():
			done = append(done, due[i])
		case err := <-f.Err():
			errs = append(errs, err)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if err := b.store.ForgetDeferred(context.WithoutCancel(ctx), done); err != nil {
		errs = append(errs, err)
	}
	b.undeferred.Add(uint64(len(done)))
	if len(errs) > 0 {
		return len(due), fmt.Errorf("bridge: %d of %d deferred deliveries not brought back: %w", len(due)-len(done), len(due), errors.Join(errs...))
	}
	return len(due), nil
}

func (b *Bridge) publishDeferred(msg *nats.Msg, deadline time.Time) (jetstream.PubAckFuture, error) {
	for {
		paf, err := b.js.PublishMsgAsync(msg,
			jetstream.WithExpectStream(b.cfg.Queue.Stream),
			jetstream.WithStallWait(stallWait))
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) || !time.Now().Before(deadline) {
			return paf, err
		}
	}
}
