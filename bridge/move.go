package bridge

import "context"

// move takes up to BatchSize ids from dispatch:pending into this instance's
// processing list in one round trip, or, when the list is empty, waits up to
// BlockTimeout for one id with BLMOVE. On an error some ids may have moved
// unreported; the caller recovers them by draining the processing list.
func (b *Bridge) move(ctx context.Context) ([]string, error) {
	ids, err := b.store.MovePending(ctx, b.processingKey, b.cfg.BatchSize)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		b.moved.Add(uint64(len(ids)))
		return ids, nil
	}

	id, ok, err := b.store.AwaitPending(ctx, b.processingKey, b.cfg.BlockTimeout)
	if !ok {
		return nil, err
	}
	b.moved.Add(1)
	return []string{id}, nil
}
