package bridge

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/store"
)

// moveBatchLua moves up to ARGV[1] ids from the pending list to the
// processing list, oldest first, and stops at the first empty read: one
// round trip, and no wasted LMOVEs when only a few ids wait. A script runs
// atomically, so an id is always in exactly one of the two lists.
//
//	KEYS = [dispatch:pending, processing list]  ARGV = [max]
const moveBatchLua = `
local out = {}
for i = 1, tonumber(ARGV[1]) do
  local id = redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT')
  if not id then break end
  out[#out + 1] = id
end
return out
`

// move takes up to BatchSize ids from dispatch:pending into this instance's
// processing list in one round trip, or, when the list is empty, waits up to
// BlockTimeout for one id with BLMOVE. On an error some ids may have moved
// unreported; the caller recovers them by draining the processing list.
func (b *Bridge) move(ctx context.Context) ([]string, error) {
	ids, err := b.moveScript.Run(ctx, b.rdb, []string{store.PendingList, b.processingKey}, b.cfg.BatchSize).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	if len(ids) > 0 {
		b.moved.Add(uint64(len(ids)))
		return ids, nil
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
