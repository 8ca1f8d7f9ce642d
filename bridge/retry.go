package bridge

import (
	"context"
	"strconv"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

// promoteLoop promotes due ids from the legacy dispatch:retry ZSET every
// RetryPoll. jetrelay itself never writes that ZSET (its retries and
// put-offs live in JetStream); this drains what the reference service left
// at switch-over. Its first successful round also moves, once, whatever an
// older jetrelay left in jetrelay:deferred (migrateDeferred).
func (b *Bridge) promoteLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.RetryPoll)
	defer t.Stop()
	failing, migrated := false, false
	for {
		err := b.promoteDue(ctx)
		if perr := b.unpark(ctx); err == nil {
			err = perr
		}
		if err == nil && !migrated {
			err = b.migrateDeferred(ctx)
			migrated = err == nil
		}
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			b.log.Warn("promoting due ids from dispatch:retry or jetrelay:intake:parked failed; retrying every poll", "err", err)
			failing = true
		case err == nil && failing:
			b.log.Info("promoting from dispatch:retry and jetrelay:intake:parked works again")
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
	n, err := b.moveScored(ctx, store.RetryZSet, strconv.FormatInt(time.Now().UnixMilli(), 10))
	b.promoted.Add(n)
	return err
}

// migrateDeferred moves every delivery an older jetrelay parked in
// jetrelay:deferred into dispatch:pending, whatever its due time, with the
// same atomic script: from there the reliable path publishes it, and the
// engine puts off again whatever is not due yet (its record's
// next_retry_at) as a JetStream wake-up. An upgrade therefore loses
// nothing, and no put-off is parked in Redis again (intake holds leave
// never-sent deliveries there, which is another matter: park.go).
func (b *Bridge) migrateDeferred(ctx context.Context) error {
	n, err := b.moveScored(ctx, store.LegacyDeferredZSet, "+inf")
	b.undeferred.Add(n)
	if n > 0 {
		b.log.Info("moved deliveries left in jetrelay:deferred by an older jetrelay into dispatch:pending", "moved", n)
	}
	return err
}

// moveScored moves the ids of zset scored up to maxScore into
// dispatch:pending, a batch at a time, and returns how many it moved.
func (b *Bridge) moveScored(ctx context.Context, zset, maxScore string) (uint64, error) {
	var n uint64
	for {
		moved, err := b.store.PromoteScored(ctx, zset, maxScore, b.cfg.RetryBatchSize)
		n += uint64(len(moved))
		if err != nil || len(moved) < b.cfg.RetryBatchSize {
			return n, err
		}
	}
}
