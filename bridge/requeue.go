package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
)

// maxRequeueHops bounds how many earlier re-enqueues of one id within the
// duplicate window resolveDuplicate follows. Past it the id stays in the
// processing list; once the window has passed, the plain id is stored anew.
const maxRequeueHops = 32

// duplicate is an id whose publish JetStream absorbed: seq is the message
// its Nats-Msg-Id is remembered for.
type duplicate struct {
	id  string
	seq uint64
}

// resolveDuplicates decides, for each absorbed publish, whether the work is
// really queued. A crash-recovery republish finds its original still in the
// stream and is dropped. A deliberate re-push (an operator resetting a
// delivery to PENDING) finds the original already consumed: dropping it
// would lose the re-enqueue, so it is republished under a derived msg id
// while its record still asks for delivery. It returns the ids settled
// either way and those to retry; an error never settles an id. Duplicates
// are rare, so it takes a few round trips each.
func (b *Bridge) resolveDuplicates(ctx context.Context, dups []duplicate) (settled, unsettled []string, firstErr error) {
	// Its own budget and no cancellation: the batch's publishes used theirs,
	// and shutdown completes the attempt in progress.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.PublishTimeout)
	defer cancel()
	stream, err := b.js.Stream(ctx, b.cfg.Queue.Stream)
	if err != nil {
		for _, d := range dups {
			unsettled = append(unsettled, d.id)
		}
		return nil, unsettled, fmt.Errorf("look up stream %s to check duplicates: %w", b.cfg.Queue.Stream, err)
	}
	for _, d := range dups {
		if err := b.resolveDuplicate(ctx, stream, d); err != nil {
			unsettled = append(unsettled, d.id)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		settled = append(settled, d.id)
	}
	return settled, unsettled, firstErr
}

// resolveDuplicate settles one absorbed publish, or returns why it could
// not. Each hop follows the message the last absorbed msg id points at: a
// requeue republished after a crash is absorbed in turn, and is dropped
// only if that requeue is itself still queued.
func (b *Bridge) resolveDuplicate(ctx context.Context, stream jetstream.Stream, d duplicate) error {
	seq := d.seq
	for range maxRequeueHops {
		_, err := stream.GetMsg(ctx, seq)
		switch {
		case err == nil:
			b.duplicates.Add(1)
			return nil
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return fmt.Errorf("check whether message %d of duplicate %s is still queued: %w", seq, d.id, err)
		}
		want, sub, err := b.wantsDelivery(ctx, d.id)
		if err != nil || !want {
			return err
		}
		// An ordered subscription's requeue joins the end of its line.
		subject := b.cfg.Queue.Subject
		if b.orderingInUse(ctx) && b.ordered(sub) {
			subject = b.cfg.Queue.OrderedSubject(sub)
		}
		ack, err := b.js.PublishMsg(ctx, queue.NewRequeueMsg(subject, d.id, seq),
			jetstream.WithExpectStream(b.cfg.Queue.Stream))
		if err != nil {
			return fmt.Errorf("re-enqueue %s: %w", d.id, err)
		}
		if !ack.Duplicate {
			b.requeued.Add(1)
			b.log.Info("delivery id pushed again after its message was consumed; re-enqueued",
				"delivery_id", d.id, "consumed_seq", seq, "seq", ack.Sequence)
			return nil
		}
		seq = ack.Sequence
	}
	return fmt.Errorf("re-enqueue %s: more than %d re-enqueues within the duplicate window", d.id, maxRequeueHops)
}

// wantsDelivery reports whether id's record still asks for a delivery
// attempt. A terminal or missing record means the re-push has nothing to do
// (the engine would ack it unseen), so it is dropped. An unreadable record
// is re-enqueued all the same: the engine quarantines it where an operator
// sees it. sub is the delivery's subscription, when readable.
func (b *Bridge) wantsDelivery(ctx context.Context, id string) (want bool, sub string, err error) {
	rec, err := b.store.Delivery(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		b.log.Debug("duplicate of a consumed message dropped: delivery record not found", "delivery_id", id)
		b.duplicates.Add(1)
		return false, "", nil
	case errors.Is(err, store.ErrCorrupt):
		return true, "", nil
	case err != nil:
		return false, "", fmt.Errorf("read the record of duplicate %s: %w", id, err)
	case rec.Status.Terminal():
		b.log.Debug("duplicate of a consumed message dropped: delivery already final", "delivery_id", id, "status", rec.Status)
		b.duplicates.Add(1)
		return false, "", nil
	}
	return true, rec.SubscriptionID, nil
}
