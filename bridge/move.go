package bridge

import "context"

// move takes up to BatchSize ids from dispatch:pending into this instance's
// processing list in one round trip. While ids keep coming in full batches
// that is one batch move (MovePending); once a move found the list short
// of a batch (it was emptied), the next waits up to BlockTimeout for an id
// and moves it with whatever else came, still one round trip
// (AwaitAndMove), rather than asking an all but empty list first and
// waiting second: at a rate where each id finds the bridge waiting, that
// is one Redis round trip per delivery less. On an error some ids may have
// moved unreported; the caller recovers them by draining the processing
// list.
func (b *Bridge) move(ctx context.Context) ([]string, error) {
	var ids []string
	var err error
	if b.drained {
		ids, err = b.store.AwaitAndMove(ctx, b.processingKey, b.cfg.BatchSize, b.cfg.BlockTimeout)
	} else {
		ids, err = b.store.MovePending(ctx, b.processingKey, b.cfg.BatchSize)
	}
	b.moved.Add(uint64(len(ids)))
	// A move that came back short emptied the list (or waited for it): the
	// next one waits. An error leaves the choice to the next move too: a
	// short answer is as good a sign as any that the list is empty.
	b.drained = len(ids) < b.cfg.BatchSize
	return ids, err
}
