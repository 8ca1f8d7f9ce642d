package bridge

import (
	"context"
	"fmt"
)

// adoptChunk bounds how many ids one adopt script call moves, so adopting a
// huge list never blocks Redis for long.
const adoptChunk = 1000

// adoptLua moves up to ARGV[1] ids from an orphaned processing list to this
// instance's, oldest first so their order is kept. Checking the owner's
// heartbeat inside the script closes the race with an owner that comes back
// between our scan and the move.
//
//	KEYS = [orphan list, own list, orphan heartbeat (absent for the legacy list)]
//	returns the number moved, or -1 when the owner is alive.
const adoptLua = `
if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then return -1 end
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'list' then return 0 end
local max = tonumber(ARGV[1])
local n = 0
while n < max do
  if not redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT') then break end
  n = n + 1
end
return n
`

// drain republishes everything in this instance's processing list, oldest
// first, a batch at a time. Ids JetStream already stored come back as
// duplicates and are simply removed.
func (b *Bridge) drain(ctx context.Context) error {
	for ctx.Err() == nil {
		ids, err := b.rdb.LRange(ctx, b.processingKey, -int64(b.cfg.BatchSize), -1).Result()
		if err != nil {
			return fmt.Errorf("read %s: %w", b.processingKey, err)
		}
		if len(ids) == 0 {
			return nil
		}
		b.log.Info("republishing ids left in the processing list", "ids", len(ids))
		if !b.settle(ctx, ids, true) {
			break
		}
	}
	return ctx.Err()
}

// forgetBridgeLua drops a bridge from the registry once it is dead (no
// heartbeat) and its processing list is empty, so the registry does not grow
// with every pod name a deployment ever used.
//
//	KEYS = [jetrelay:bridges, its heartbeat, its processing list]  ARGV = [id]
const forgetBridgeLua = `
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('LLEN', KEYS[3]) > 0 then return 0 end
return redis.call('SREM', KEYS[1], ARGV[1])
`

// adoptOrphans moves into this instance's processing list the ids of every
// other registered instance whose heartbeat has expired (and, when
// configured, the idle entries of the reference service's dispatch:processing
// list). It
// returns how many ids it adopted; the caller then drains them. Instances
// are found in the jetrelay:bridges registry, not by SCAN, which would walk
// the whole keyspace (every event and delivery record) on each pass.
func (b *Bridge) adoptOrphans(ctx context.Context) (int, error) {
	total := 0
	ids, err := b.rdb.SMembers(ctx, bridgesKey).Result()
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", bridgesKey, err)
	}
	for _, owner := range ids {
		if owner == b.cfg.InstanceID {
			continue
		}
		list, heartbeat := processingPrefix+owner, heartbeatPrefix+owner
		n, err := b.adoptList(ctx, list, heartbeat)
		total += n
		if err != nil {
			return total, err
		}
		if err := b.forgetScript.Run(ctx, b.rdb, []string{bridgesKey, heartbeat, list}, owner).Err(); err != nil {
			return total, fmt.Errorf("forget bridge %s: %w", owner, err)
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
	keys := []string{list, b.processingKey}
	if heartbeat != "" {
		keys = append(keys, heartbeat)
	}
	total := 0
	for {
		n, err := b.adoptScript.Run(ctx, b.rdb, keys, adoptChunk).Int()
		if err != nil {
			return total, fmt.Errorf("adopt %s: %w", list, err)
		}
		if n < 0 {
			return total, nil
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
