package bridge

import (
	"context"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

// move takes up to BatchSize ids from dispatch:pending into this instance's
// processing list in one round trip, which also removes the ids published
// since the last move. While ids keep coming in full batches
// that is one batch move (MovePending); once a move found the list short
// of a batch (it was emptied), the next waits up to BlockTimeout for an id
// and moves it with whatever else came, still one round trip
// (store.MoveAfterRemoving with a wait), rather than asking an all but empty list first and
// waiting second: at a rate where each id finds the bridge waiting, that
// is one Redis round trip per delivery less. The move also reads the moved
// ids' routing fields (store.TraceOrigin, by id), in the same round trip.
// On an error some ids may have moved unreported; the caller recovers them
// by draining the processing list.
func (b *Bridge) move(ctx context.Context) ([]string, map[string]store.TraceOrigin, error) {
	var wait time.Duration
	if b.drained {
		wait = b.cfg.BlockTimeout
	}
	// The batch published last goes out of the processing list in the same
	// round trip, ahead of the move (store.MoveAfterRemoving).
	ids, origins, removeErr, err := b.store.MoveAfterRemoving(ctx, b.processingKey, b.toRemove, b.cfg.BatchSize, wait)
	if removeErr == nil {
		b.toRemove = nil
	} else if ctx.Err() == nil {
		b.log.Debug("published ids not yet removed from the processing list; removing them with the next move", "ids", len(b.toRemove), "err", removeErr)
	}
	b.moved.Add(uint64(len(ids)))
	// A move that came back short emptied the list (or waited for it): the
	// next one waits. An error leaves the choice to the next move too: a
	// short answer is as good a sign as any that the list is empty.
	b.drained = len(ids) < b.cfg.BatchSize
	return ids, origins, err
}

// removePublished removes from the processing list the ids published since
// the last move, on their own round trip: before anything else (a drain,
// an adoption, a shutdown) works on the list, which must then hold only
// what is not yet published.
func (b *Bridge) removePublished(ctx context.Context) error {
	if len(b.toRemove) == 0 {
		return nil
	}
	if _, err := b.ack(ctx, b.toRemove); err != nil {
		return err
	}
	b.toRemove = nil
	return nil
}
