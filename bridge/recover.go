package bridge

import (
	"context"

	"github.com/jetrelay/jetrelay/internal/store"
)

// adoptChunk bounds how many ids one adopt script call moves, so adopting a
// huge list never blocks Redis for long.
const adoptChunk = 1000

// drain republishes everything in this instance's processing list, oldest
// first, a batch at a time. Ids JetStream already stored come back as
// duplicates and are simply removed.
func (b *Bridge) drain(ctx context.Context) error {
	for ctx.Err() == nil {
		ids, err := b.store.Oldest(ctx, b.processingKey, b.cfg.BatchSize)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		b.log.Info("republishing ids left in the processing list", "ids", len(ids))
		if !b.settle(ctx, ids, nil, true) {
			break
		}
	}
	return ctx.Err()
}

// adoptOrphans moves into this instance's processing list the ids of every
// other registered instance whose heartbeat has expired (and, when
// configured, the idle entries of the reference service's dispatch:processing
// list). It
// returns how many ids it adopted; the caller then drains them. Instances
// are found in the jetrelay:bridges registry, not by SCAN, which would walk
// the whole keyspace (every event and delivery record) on each pass.
func (b *Bridge) adoptOrphans(ctx context.Context) (int, error) {
	total := 0
	ids, err := b.store.BridgeIDs(ctx)
	if err != nil {
		return 0, err
	}
	for _, owner := range ids {
		if owner == b.cfg.InstanceID {
			continue
		}
		n, err := b.adoptList(ctx, store.ProcessingList(owner), store.HeartbeatKey(owner))
		total += n
		if err != nil {
			return total, err
		}
		forgot, err := b.store.ForgetBridge(ctx, owner)
		if err != nil {
			return total, err
		}
		if forgot {
			b.dropKeeper(ctx, owner)
		}
	}
	if b.cfg.AdoptLegacyProcessing {
		n, err := b.adoptLegacy(ctx)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// adoptList moves the whole of list into this instance's processing list
// unless heartbeat (when given) shows its owner alive.
func (b *Bridge) adoptList(ctx context.Context, list, heartbeat string) (int, error) {
	total := 0
	for {
		n, alive, err := b.store.Adopt(ctx, list, b.processingKey, heartbeat, adoptChunk)
		if err != nil || alive {
			return total, err
		}
		total += n
		if n < adoptChunk {
			break
		}
	}
	if total > 0 {
		b.adopted.Add(uint64(total))
		b.log.Info("adopted an orphaned processing list", "list", list, "ids", total)
	}
	return total, nil
}
