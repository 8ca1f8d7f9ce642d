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

// errPubAckTimeout marks ids whose PubAck did not arrive within PublishTimeout.
var errPubAckTimeout = errors.New("no PubAck within the publish timeout")

// stallWait is how long one async publish may wait for a free slot before
// the bridge checks its deadline and tries again.
const stallWait = 250 * time.Millisecond

// settle publishes ids (all already in this instance's processing list) and
// removes them from the list once acknowledged, retrying what failed with
// capped backoff before anything new is moved. known holds the routing
// fields the move read with the ids (nil: read them here). It reports whether every id
// was settled; false means ctx ended and the rest stay in the processing
// list for recovery. The attempt in progress when ctx ends is completed,
// so a clean shutdown does not strand a batch.
func (b *Bridge) settle(ctx context.Context, ids []string, known map[string]store.TraceOrigin, recovered bool) bool {
	var bo backoff
	for {
		left, err := b.publishBatch(ctx, ids, known, recovered)
		if len(left) == 0 {
			b.progressed()
			return true
		}
		if len(left) < len(ids) {
			// Some got through (a full stream draining, say): retry soon.
			bo.reset()
		}
		ids = left
		b.stalled(err)
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			// Nobody answers for the subject: the stream was deleted.
			// Recreating it is what every jetrelay process does at start-up.
			b.recreateStream(ctx)
		}
		d := bo.step()
		// One line per backoff step, however many ids failed.
		b.log.Warn("publish failed; ids kept in the processing list", "ids", len(ids), "err", err, "retry_in", d)
		if !sleep(ctx, d) {
			return false
		}
	}
}

// recreateStream ensures the dispatch stream exists again.
func (b *Bridge) recreateStream(ctx context.Context) {
	ectx, cancel := context.WithTimeout(ctx, b.cfg.PublishTimeout)
	defer cancel()
	if _, err := queue.EnsureStream(ectx, b.js, b.cfg.Queue); err != nil {
		b.log.Warn("dispatch stream could not be recreated", "err", err)
		return
	}
	b.log.Warn("dispatch stream was missing and has been recreated", "stream", b.cfg.Queue.Stream)
}

// publishBatch makes one attempt at ids and returns those still unsettled
// with the first error seen.
func (b *Bridge) publishBatch(ctx context.Context, ids []string, known map[string]store.TraceOrigin, recovered bool) ([]string, error) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.PublishTimeout)
	defer cancel()

	var good, bad, remaining []string
	for _, id := range ids {
		if queue.ValidateDeliveryID(id) != nil {
			bad = append(bad, id)
		} else {
			good = append(good, id)
		}
	}
	var errs []error
	if len(bad) > 0 {
		if err := b.quarantine(actx, bad); err != nil {
			remaining = append(remaining, bad...)
			errs = append(errs, err)
		}
	}
	good, full, err := b.fit(actx, good)
	remaining = append(remaining, full...)
	if err != nil {
		errs = append(errs, err)
	}
	origins := b.origins(actx, good, known)
	good, origins, parked := b.park(actx, good, origins)
	plain, lines := b.items(good, origins)
	acked, dups, failed, err := b.publish(plain)
	remaining = append(remaining, failed...)
	if err != nil {
		errs = append(errs, err)
	}
	lacked, ldups, lfailed, err := b.publishLines(lines)
	acked, dups, remaining = append(acked, lacked...), append(dups, ldups...), append(remaining, lfailed...)
	if err != nil {
		errs = append(errs, err)
	}
	if len(dups) > 0 {
		settled, unsettled, err := b.resolveDuplicates(ctx, dups)
		acked = append(acked, settled...)
		remaining = append(remaining, unsettled...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if recovered {
		b.recovered.Add(uint64(len(acked)))
	}
	// Parked ids leave the processing list as published ones do.
	acked = append(acked, parked...)
	switch {
	case len(acked) > 0 && !recovered && len(remaining) == 0:
		// The whole batch is out: the dispatch loop's next move removes
		// it, in its own round trip (move.go). A batch the loop must retry
		// (a full stream, a failed publish) removes what got out now, so
		// the list holds only what is still to publish while it waits.
		b.toRemove = append(b.toRemove, acked...)
	case len(acked) > 0:
		unacked, err := b.ack(actx, acked)
		remaining = append(remaining, unacked...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return remaining, errs[0]
	}
	return remaining, nil
}

// fit splits ids into those that fit under the stream's MaxMsgs/MaxBytes
// back-pressure (queue.Room) and those that must wait in Redis. The stream
// has no limits of its own, because a limit would evict scheduled retries and
// held deliveries; this check is what keeps intake bounded instead. When the
// room cannot be read, nothing is held back: an unlimited stream is the
// lossless side to err on.
func (b *Bridge) fit(ctx context.Context, ids []string) (fit, wait []string, err error) {
	room, err := queue.Room(ctx, b.js, b.cfg.Queue)
	if err != nil {
		b.log.Warn("cannot read the dispatch stream's room; publishing anyway", "err", err)
		return ids, nil, nil
	}
	if room == queue.Unlimited || room >= int64(len(ids)) {
		return ids, nil, nil
	}
	return ids[:room], ids[room:], queue.ErrStreamFull
}

// publish sends every id asynchronously with Nats-Msg-Id = id, then waits
// for all PubAcks until PublishTimeout. It returns the ids stored as new
// messages, those JetStream absorbed as duplicates (for resolveDuplicates),
// and the failed ones.
func (b *Bridge) publish(items []workItem) (stored []string, dups []duplicate, failed []string, firstErr error) {
	if len(items) == 0 {
		return nil, nil, nil, nil
	}
	deadline := time.Now().Add(b.cfg.PublishTimeout)
	fail := func(id string, err error) {
		failed = append(failed, id)
		if firstErr == nil {
			firstErr = err
		}
	}
	type pending struct {
		id  string
		paf jetstream.PubAckFuture
	}
	inflight := make([]pending, 0, len(items))
	for _, it := range items {
		id := it.id
		msg := queue.NewMsg(b.cfg.Queue.Subject, id)
		queue.SetRoute(msg, it.route)
		if it.back {
			msg.Header.Set(queue.UnparkedHeader, "1")
		}
		var span trace.Span
		if it.parent != nil {
			span = b.startPublish(it.parent, msg, id)
		}
		paf, err := b.publishAsync(msg, deadline)
		if span != nil {
			endPublish(span, err)
		}
		if err != nil {
			fail(id, fmt.Errorf("publish %s: %w", id, err))
			continue
		}
		inflight = append(inflight, pending{id, paf})
	}

	onAck := func(id string, ack *jetstream.PubAck) {
		if ack.Duplicate {
			dups = append(dups, duplicate{id: id, seq: ack.Sequence})
			return
		}
		stored = append(stored, id)
		b.published.Add(1)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	timedOut := false
	for _, p := range inflight {
		if timedOut {
			// Past the deadline, take only what has already resolved.
			select {
			case ack := <-p.paf.Ok():
				onAck(p.id, ack)
			case err := <-p.paf.Err():
				fail(p.id, err)
			default:
				fail(p.id, errPubAckTimeout)
			}
			continue
		}
		select {
		case ack := <-p.paf.Ok():
			onAck(p.id, ack)
		case err := <-p.paf.Err():
			fail(p.id, err)
		case <-timer.C:
			timedOut = true
			fail(p.id, errPubAckTimeout)
		}
	}
	return stored, dups, failed, firstErr
}

// publishAsync publishes one id, waiting for a free async-publish slot
// while the JetStream context has too many PubAcks outstanding.
func (b *Bridge) publishAsync(msg *nats.Msg, deadline time.Time) (jetstream.PubAckFuture, error) {
	for {
		paf, err := b.js.PublishMsgAsync(msg,
			jetstream.WithMsgID(string(msg.Data)),
			jetstream.WithExpectStream(b.cfg.Queue.Stream),
			jetstream.WithStallWait(stallWait))
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) || !time.Now().Before(deadline) {
			return paf, err
		}
	}
}

// ack removes acknowledged ids from the processing list in one round trip
// and returns the ids whose removal failed.
func (b *Bridge) ack(ctx context.Context, ids []string) ([]string, error) {
	return b.store.RemoveFromList(ctx, b.processingKey, ids)
}

// quarantine moves malformed ids from the processing list to dispatch:failed
// (store.Quarantine), where an operator sees them and they never block the
// queue. An id is removed from the processing list only after its entry is
// written, so a crash or a Redis error in between quarantines it twice
// rather than never.
func (b *Bridge) quarantine(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := b.store.Quarantine(ctx, shortID(id), "malformed_id", []byte(id)); err != nil {
			return fmt.Errorf("quarantine malformed id: %w", err)
		}
	}
	if _, err := b.ack(ctx, ids); err != nil {
		return fmt.Errorf("quarantine malformed ids: %w", err)
	}
	for _, id := range ids {
		b.log.Warn("malformed delivery id quarantined in dispatch:failed",
			"delivery_id_prefix", preview(id), "reason", queue.ValidateDeliveryID(id))
	}
	b.quarantined.Add(uint64(len(ids)))
	return nil
}

// shortID bounds the delivery_id field of a quarantine entry; the entry's
// payload carries the value itself (store.Quarantine caps it at 64 KiB).
func shortID(id string) string {
	if len(id) > queue.MaxDeliveryIDLen {
		return id[:queue.MaxDeliveryIDLen]
	}
	return id
}

// preview keeps a log line short whatever garbage the id holds.
func preview(id string) string {
	const n = 64
	if len(id) > n {
		return fmt.Sprintf("%q…", id[:n])
	}
	return fmt.Sprintf("%q", id)
}
