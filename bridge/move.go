package bridge

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/store"
)

// move takes up to BatchSize ids from dispatch:pending into this instance's
// processing list in one pipelined round trip, or, when the list is empty,
// waits up to BlockTimeout for one id with BLMOVE. Each LMOVE is atomic, so
// an id is always in exactly one of the two lists. The ids it returns are
// valid even when err is not nil: the error may have hidden further moves,
// which the caller recovers by draining the processing list.
func (b *Bridge) move(ctx context.Context) ([]string, error) {
	cmds, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range b.cfg.BatchSize {
			p.LMove(ctx, store.PendingList, b.processingKey, "RIGHT", "LEFT")
		}
		return nil
	})
	var ids []string
	var moveErr error
	for _, c := range cmds {
		id, cerr := c.(*redis.StringCmd).Result()
		switch {
		case cerr == nil:
			ids = append(ids, id)
		case !errors.Is(cerr, redis.Nil) && moveErr == nil:
			moveErr = cerr
		}
	}
	if moveErr == nil && err != nil && !errors.Is(err, redis.Nil) {
		moveErr = err
	}
	if len(ids) > 0 || moveErr != nil {
		b.moved.Add(uint64(len(ids)))
		return ids, moveErr
	}

	id, err := b.rdb.BLMove(ctx, store.PendingList, b.processingKey, "RIGHT", "LEFT", b.cfg.BlockTimeout).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, err
	}
	b.moved.Add(1)
	return []string{id}, nil
}
