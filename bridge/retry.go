package bridge

import (
	"context"
	"time"
)

// promoteLimit is the reference service's batch size for promotion.
const promoteLimit = 100

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
		moved, err := b.store.PromoteDueRetries(ctx, time.Now(), promoteLimit)
		if err != nil {
			return err
		}
		b.promoted.Add(uint64(len(moved)))
		if len(moved) < promoteLimit {
			return nil
		}
	}
}
