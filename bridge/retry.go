package bridge

import (
	"context"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

// requeueRetryBatchLua is the reference service's REQUEUE_RETRY_BATCH_LUA
// (v0.1.25.24, contract §10), verbatim: due ids leave dispatch:retry and
// enter dispatch:pending in one atomic step, so concurrent promoters never
// double-enqueue an id.
//
//	KEYS = [dispatch:retry, dispatch:pending]  ARGV = [now_ms, limit]
const requeueRetryBatchLua = `local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local moved = {}
for _, id in ipairs(ready) do
  if redis.call('ZREM', KEYS[1], id) > 0 then
    redis.call('LPUSH', KEYS[2], id)
    table.insert(moved, id)
  end
end
return moved`

// promoteLoop promotes due ids from the legacy dispatch:retry ZSET every
// RetryPoll. jetrelay itself never writes that ZSET (retries are
// NakWithDelay); this drains what the reference service left at switch-over.
func (b *Bridge) promoteLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.RetryPoll)
	defer t.Stop()
	failing := false
	for {
		err := b.promoteDue(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			b.log.Warn("promoting due ids from dispatch:retry failed; retrying every poll", "err", err)
			failing = true
		case err == nil && failing:
			b.log.Info("promoting from dispatch:retry works again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// promoteDue promotes every due id, a batch at a time.
func (b *Bridge) promoteDue(ctx context.Context) error {
	for {
		moved, err := b.requeueScript.Run(ctx, b.rdb, []string{store.RetryZSet, store.PendingList}, time.Now().UnixMilli(), b.cfg.RetryBatchSize).StringSlice()
		if err != nil {
			return err
		}
		b.promoted.Add(uint64(len(moved)))
		if len(moved) < b.cfg.RetryBatchSize {
			return nil
		}
	}
}
