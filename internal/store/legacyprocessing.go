package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Keys of the reference service's (0.1.25.20+) claim bookkeeping beside its
// dispatch:processing list (LegacyProcessingList).
const (
	LegacyClaimedAt  = "dispatch:processing:claimed_at"
	LegacyClaimOwner = "dispatch:processing:claim_owner"
	// legacyOrphanOwner is the owner token upstream stamps on an entry it
	// found without one.
	legacyOrphanOwner = "__orphan__"
)

// adoptLegacyLua looks at up to ARGV[3] entries of the reference's
// dispatch:processing list, oldest first, as upstream's RECOVER_STALE_BATCH
// does: an entry without a claimed_at is stamped now (and given the
// __orphan__ owner) so that it becomes adoptable after the idle period; an
// entry claimed at or before the cutoff ARGV[2] is moved to the caller's
// processing list and its bookkeeping removed; the others are rotated to
// the head and left for their owner. A live reference worker never holds a
// claim that long, so the move never takes a delivery it is sending.
//
//	KEYS = [dispatch:processing, …:claimed_at, …:claim_owner, own list]
//	ARGV = [now ms, cutoff ms, max entries]   returns the number moved
var adoptLegacyLua = redis.NewScript(`
if redis.call('TYPE', KEYS[1]).ok ~= 'list' then return 0 end
local limit = math.min(redis.call('LLEN', KEYS[1]), tonumber(ARGV[3]))
local moved = 0
for i = 1, limit do
  local id = redis.call('LINDEX', KEYS[1], -1)
  if not id then break end
  local at = redis.call('ZSCORE', KEYS[2], id)
  if not at then
    redis.call('ZADD', KEYS[2], ARGV[1], id)
    if not redis.call('HGET', KEYS[3], id) then redis.call('HSET', KEYS[3], id, '` + legacyOrphanOwner + `') end
    at = ARGV[1]
  end
  if tonumber(at) <= tonumber(ARGV[2]) then
    redis.call('LMOVE', KEYS[1], KEYS[4], 'RIGHT', 'LEFT')
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    moved = moved + 1
  else
    redis.call('LMOVE', KEYS[1], KEYS[1], 'RIGHT', 'LEFT')
  end
end
return moved
`)

// AdoptLegacy moves into own up to max entries of the reference's
// dispatch:processing list whose claim has been idle for idle (claimed at
// or before now-idle), and returns how many it moved.
func (s *Store) AdoptLegacy(ctx context.Context, own string, now time.Time, idle time.Duration, max int) (int, error) {
	keys := []string{LegacyProcessingList, LegacyClaimedAt, LegacyClaimOwner, own}
	nowMs := strconv.FormatInt(now.UnixMilli(), 10)
	cutoff := strconv.FormatInt(now.Add(-idle).UnixMilli(), 10)
	n, err := adoptLegacyLua.Run(ctx, s.rdb, keys, nowMs, cutoff, max).Int()
	if err != nil {
		return 0, fmt.Errorf("adopt %s: %w", LegacyProcessingList, err)
	}
	return n, nil
}
