package engine

import "time"

// Two copies of one work item can be handled at once: a redelivery after
// AckWait beside a first copy that outlived it (a replica frozen by a long
// GC pause or a starved VM, whose keep-alive stopped with it), a wake-up
// beside a requeue. Both may send; the outcome write of exactly one of them
// wins (outcome.superseded), so each attempt number has one outcome and
// failures are counted once.
//
// The copy that loses must then settle its item the way the winner settled
// the delivery, never by a plain ack. On a work-queue stream the server keys
// an item's pending state by its stream sequence, not by which delivery of it
// a client holds: when the two copies are the same message, an ack of the
// losing copy deletes the item the winner has just released with a short
// delayed nak for its retry (wait), and the delivery is left RETRYING with
// nothing queued to wake it, forever.
//
// So the loser reads the record again and settles by it:
//   - final (SUCCESS, FAILED): nothing is left to do, and an ack of either
//     copy is right;
//   - waiting for a time (next_retry_at, written by the winner or by a later
//     handling): it settles through wait, as the winner did. A short retry
//     wait stays a delayed nak of its own copy, which, when the copies are
//     the same message, only restates the winner's nak (both name the same
//     time), so the first retry stays as exact as without a second copy
//     (a message schedule would fire on the server's 250 ms tick). A longer
//     wait publishes the delivery's wake-up on its own schedule subject,
//     which replaces the winner's identical one, before the item is acked.
//     Either way the work is never acked while the delivery is neither final
//     nor queued elsewhere. When that time has already come, the loser
//     leaves its copy alone: the winner's nak is due, and the server may
//     already have handed the item to a third handling, which a nak now
//     would duplicate (a second send). A copy that is another message
//     comes back after AckWait and is settled then.
//   - anything else (held for an inactive subscription, requeued by an
//     operator): whoever moved it on stored its successor (the held copy,
//     the fresh work item) before acking, so the loser's ack removes only
//     its own duplicate.
//
// If the record cannot be read (Redis unreachable) the item is released for
// a later handling like any infrastructure error: that handling finds the
// outcome recorded and settles by it.

// settleLoser settles a work item whose outcome write lost to another copy.
func (e *Engine) settleLoser(h *handling) settlement {
	rec, err := e.store.Delivery(h.ctx, h.id)
	if settled, s := e.afterWrite(h, err); settled {
		return s
	}
	d := rec.Delivery
	switch {
	case d.Status.Terminal():
		h.log.Debug("outcome already recorded by another copy of this work item", "outcome", "duplicate", "status", d.Status)
		return ack()
	case d.NextRetryAt != nil && !d.NextRetryAt.After(time.Now()):
		h.log.Debug("another copy recorded this attempt and its retry is due; leaving this copy to it", "outcome", "duplicate")
		return leave()
	case d.NextRetryAt != nil:
		h.log.Debug("another copy recorded this attempt; settling as it did", "outcome", "duplicate", "next_retry_at", d.NextRetryAt.Time)
		h.rec = rec
		return e.wait(h, d.NextRetryAt.Time, reasonEarly)
	default:
		h.log.Debug("another copy moved this delivery on; dropping this copy", "outcome", "duplicate", "status", d.Status)
		return ack()
	}
}
