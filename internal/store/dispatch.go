package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The bridge's own keys (jetrelay's, not Cycles'): each bridge instance
// moves ids from PendingList into a processing list of its own, keeps a
// heartbeat key alive while it runs, and is listed in BridgesSet so that
// others find its list to adopt when the heartbeat expires.
const (
	// LegacyProcessingList is the reference service's plain processing list
	// (v0.1.25.24 moves ids there before it dispatches them).
	LegacyProcessingList = "dispatch:processing"
	// BridgesSet is the SET of bridge instance ids that ever ran; a member
	// whose heartbeat expired and whose processing list is empty is removed.
	BridgesSet = "jetrelay:bridges"
)

// ProcessingList is the LIST one bridge instance holds its moved, not yet
// published ids in.
func ProcessingList(instanceID string) string { return "dispatch:processing:" + instanceID }

// HeartbeatKey is the key whose TTL says a bridge instance is alive.
func HeartbeatKey(instanceID string) string { return "jetrelay:bridge:" + instanceID }

// moveBatchLua moves up to ARGV[1] ids from the pending list to the
// processing list, oldest first: one RPOP of them all and one LPUSH, which
// leaves the processing list as one LMOVE per id would (the newest moved
// at its head), in two commands per batch instead of one per id. A script
// runs atomically, so an id is always in exactly one of the two lists; the
// processing list's type is checked before anything is popped, since Redis
// does not undo a script's RPOP when its LPUSH fails.
//
// In the same call it reads the delivery records of the ids it moved and
// of the ARGV[2] ids below them (the one a BLMOVE pipelined ahead of it
// moved), which the bridge publishes with their routing fields
// (TraceOrigin): an MGET of its own would be a second round trip per
// move, one per delivery at a rate where each id finds the bridge
// waiting. It reads keys it is not given, which a single Redis (or one
// behind Sentinel, which the bridge needs anyway) allows. The reply is
// {moved ids, the ids whose records were read, their records}; a missing
// record is a nil.
//
//	KEYS = [dispatch:pending, processing list]
//	ARGV = [max, ids below the moved ones to read, delivery key prefix]
var moveBatchLua = redis.NewScript(`
local t = redis.call('TYPE', KEYS[2]).ok
if t ~= 'list' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[2] .. ' is not a list')
end
local ids = redis.call('RPOP', KEYS[1], ARGV[1]) or {}
for i = 1, #ids, 1000 do
  redis.call('LPUSH', KEYS[2], unpack(ids, i, math.min(i + 999, #ids)))
end
local n = #ids + tonumber(ARGV[2])
if n == 0 then return {ids, {}, {}} end
local head = redis.call('LRANGE', KEYS[2], 0, n - 1)
local recs = {}
for i = 1, #head, 1000 do
  local keys = {}
  for j = i, math.min(i + 999, #head) do keys[#keys + 1] = ARGV[3] .. head[j] end
  for _, r in ipairs(redis.call('MGET', unpack(keys))) do recs[#recs + 1] = r end
end
return {ids, head, recs}
`)

// moveArgs is moveBatchLua's ARGV: move up to max, read the records of
// below more.
func moveArgs(max, below int) []any { return []any{max, below, DeliveryKey("")} }

// movedReply reads moveBatchLua's reply: the moved ids and, by id, the
// trace origins of the records it read.
func movedReply(v any, err error) ([]string, map[string]TraceOrigin, error) {
	if errors.Is(err, redis.Nil) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	parts, ok := v.([]any)
	if !ok || len(parts) != 3 {
		return nil, nil, fmt.Errorf("store: move: unexpected reply %T", v)
	}
	ids, err1 := replyStrings(parts[0])
	head, err2 := replyStrings(parts[1])
	recs, ok := parts[2].([]any)
	if err := errors.Join(err1, err2); err != nil || !ok || len(recs) != len(head) {
		return ids, nil, fmt.Errorf("store: move: unexpected reply (%d ids read, %d records): %w", len(head), len(recs), err)
	}
	origins := make(map[string]TraceOrigin, len(head))
	for i, id := range head {
		var o TraceOrigin
		if raw, ok := recs[i].(string); ok {
			o = traceOriginOf(raw)
		}
		origins[id] = o
	}
	return ids, origins, nil
}

// replyStrings is a reply's array of strings.
func replyStrings(v any) ([]string, error) {
	vals, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("store: move: %T is not an array", v)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		if out[i], ok = v.(string); !ok {
			return nil, fmt.Errorf("store: move: %T is not a string", v)
		}
	}
	return out, nil
}

// MovePending moves up to max ids from dispatch:pending into list in one
// round trip, oldest first, and returns them (none when it is empty) with
// their records' trace origins, by id. On an error some ids may have moved
// unreported; the caller recovers them by draining list.
func (s *Store) MovePending(ctx context.Context, list string, max int) ([]string, map[string]TraceOrigin, error) {
	return s.movePending(ctx, list, max, 0)
}

// movePending is MovePending that also reads the records of the below ids
// under the moved ones.
func (s *Store) movePending(ctx context.Context, list string, max, below int) ([]string, map[string]TraceOrigin, error) {
	return movedReply(moveBatchLua.Run(ctx, s.rdb, []string{PendingList, list}, moveArgs(max, below)...).Result())
}

// AwaitPending waits up to timeout for one id in dispatch:pending and moves
// it into list (BLMOVE). ok is false when none came.
func (s *Store) AwaitPending(ctx context.Context, list string, timeout time.Duration) (id string, ok bool, err error) {
	id, err = s.rdb.BLMove(ctx, PendingList, list, "RIGHT", "LEFT", timeout).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return id, true, nil
}

// MoveAfterRemoving removes done from list, as RemoveFromList does (the
// ids the bridge has published since it moved them), and then moves the
// next ids from dispatch:pending into list: up to max at once (MovePending)
// when wait is 0, otherwise waiting up to wait for the first and taking
// up to max-1 more with it. Waiting, BLMOVE and the batch move are
// pipelined in one round trip, where AwaitPending and then MovePending
// take two: the bridge's move while dispatch:pending is all but empty, when
// one round trip per delivery is a measurable share of its cost. A
// pipeline's replies are read under the client's ReadTimeout, not the
// blocking command's own, so on a client whose ReadTimeout does not cover
// wait (or whose options are not known) it takes two round trips. The
// removal goes in the same round trip, ahead of the move, so the published
// batch leaves list exactly when it would have in a round trip of its own,
// before anything new is pushed onto it, and a bridge at a low rate makes
// one round trip per batch for both instead of two. removeErr is the removal's error: done stays in list, and the
// caller removes it later (a crash in between republishes it, which the
// stream's duplicate window absorbs, as after a crash before any removal).
// err is the move's: on an error some ids may have moved unreported, as
// with MovePending. origins are the moved ids' trace origins by id, read
// by the move itself (moveBatchLua); an id missing from it (a lone id a
// wait moved on a client that cannot pipeline it) is the caller's to read.
func (s *Store) MoveAfterRemoving(ctx context.Context, list string, done []string, max int, wait time.Duration) (ids []string, origins map[string]TraceOrigin, removeErr, err error) {
	block := wait > 0
	// A pipelined EVALSHA that the server's script cache lacks fails, and
	// its removal must then be made after the move (below), late by the
	// move's wait. So until a removal has loaded the script (a move's
	// first, or one made outside a move: RemoveFromList), a removal goes
	// on its own, loading it; one that found the cache flushed falls back
	// to RemoveFromList, which loads it again.
	if block && (max < 2 || !s.pipelinesBlock(wait)) || len(done) > 0 && !s.removeLoaded.Load() {
		if len(done) > 0 {
			_, removeErr = s.RemoveFromList(ctx, list, done)
		}
		if block {
			ids, origins, err = s.awaitThenMove(ctx, list, max, wait)
		} else {
			ids, origins, err = s.MovePending(ctx, list, max)
		}
		return ids, origins, removeErr, err
	}
	if !block && len(done) == 0 {
		ids, origins, err = s.MovePending(ctx, list, max)
		return ids, origins, nil, err
	}
	pipe := s.rdb.Pipeline()
	var removal *redis.Cmd
	if len(done) > 0 {
		removal = removeHeadLua.EvalSha(ctx, pipe, []string{list}, idArgs(done)...)
	}
	var first *redis.StringCmd
	rest, below := max, 0
	if block {
		// The script reads the record of what the wait moved too (or,
		// when it timed out, of an older id at the list's head, which
		// nobody asks for).
		first = pipe.BLMove(ctx, PendingList, list, "RIGHT", "LEFT", wait)
		rest, below = rest-1, 1
	}
	more := moveBatchLua.EvalSha(ctx, pipe, []string{PendingList, list}, moveArgs(rest, below)...)
	_, _ = pipe.Exec(ctx)
	if removal != nil {
		switch err := removal.Err(); {
		case err == nil:
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			// The script cache was flushed since: Run loads it. The move
			// ran first this time, so the removal finds done below the
			// new ids, which it handles (one LREM per id).
			s.removeLoaded.Store(false)
			_, removeErr = s.RemoveFromList(ctx, list, done)
		default:
			removeErr = fmt.Errorf("remove acknowledged ids from %s: %w", list, err)
		}
	}
	if first != nil {
		switch id, err := first.Result(); {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return nil, nil, removeErr, err
		default:
			ids = append(ids, id)
		}
	}
	moved, origins, err := movedReply(more.Result())
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The script cache was flushed (or never had it): Run loads it.
		moved, origins, err = s.movePending(ctx, list, max-len(ids), len(ids))
	}
	return append(ids, moved...), origins, removeErr, err
}

// awaitThenMove waits and moves in two round trips.
func (s *Store) awaitThenMove(ctx context.Context, list string, max int, timeout time.Duration) ([]string, map[string]TraceOrigin, error) {
	id, ok, err := s.AwaitPending(ctx, list, timeout)
	if !ok {
		return nil, nil, err
	}
	if max < 2 {
		return []string{id}, nil, nil
	}
	more, origins, err := s.movePending(ctx, list, max-1, 1)
	return append([]string{id}, more...), origins, err
}

// pipelinesBlock reports whether a pipeline may hold a command blocking
// for timeout: the client is a plain one whose ReadTimeout (as the client
// applied it: 0 or negative is no deadline) outlasts it by a second.
func (s *Store) pipelinesBlock(timeout time.Duration) bool {
	c, ok := s.rdb.(*redis.Client)
	if !ok {
		return false
	}
	rt := c.Options().ReadTimeout
	return rt <= 0 || rt >= timeout+time.Second
}

// Oldest returns up to n of list's oldest ids, oldest last.
func (s *Store) Oldest(ctx context.Context, list string, n int) ([]string, error) {
	ids, err := s.rdb.LRange(ctx, list, -int64(n), -1).Result()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", list, err)
	}
	return ids, nil
}

// removeHeadLua removes one occurrence of each id in ARGV from the list
// KEYS[1]. When the list's first #ARGV entries are exactly those ids (the
// batch just moved there, all of it published: the usual case) one LTRIM
// drops them; otherwise each id is removed with LREM, as one LREM per id
// would remove the same entries (the first occurrence of each).
var removeHeadLua = redis.NewScript(`
local n = #ARGV
local head = redis.call('LRANGE', KEYS[1], 0, n - 1)
if #head == n then
  local want = {}
  for _, id in ipairs(ARGV) do want[id] = (want[id] or 0) + 1 end
  local same = true
  for _, id in ipairs(head) do
    local c = want[id]
    if not c or c == 0 then same = false break end
    want[id] = c - 1
  end
  if same then
    redis.call('LTRIM', KEYS[1], n, -1)
    return n
  end
end
for _, id in ipairs(ARGV) do redis.call('LREM', KEYS[1], 1, id) end
return n
`)

// RemoveFromList removes one occurrence of each id from list in one round
// trip and returns the ids whose removal failed (all of them or none),
// with the error.
func (s *Store) RemoveFromList(ctx context.Context, list string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	if err := removeHeadLua.Run(ctx, s.rdb, []string{list}, idArgs(ids)...).Err(); err != nil {
		return ids, fmt.Errorf("remove acknowledged ids from %s: %w", list, err)
	}
	// The script is in Redis's cache now (Run loads it if it was not):
	// the next move may carry a removal in its own round trip, whoever
	// removed first (a move, a drain, an adoption).
	s.removeLoaded.Store(true)
	return nil, nil
}

// idArgs is ids as a script's ARGV.
func idArgs(ids []string) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}

// Beat writes instanceID's heartbeat key with its TTL (value is for
// operators) and keeps the instance in BridgesSet, atomically.
func (s *Store) Beat(ctx context.Context, instanceID, value string, ttl time.Duration) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, HeartbeatKey(instanceID), value, ttl)
		p.SAdd(ctx, BridgesSet, instanceID)
		return nil
	})
	return err
}

// StopBeating removes instanceID's heartbeat key, so a live bridge may adopt
// its list at once rather than after the TTL.
func (s *Store) StopBeating(ctx context.Context, instanceID string) error {
	return s.rdb.Del(ctx, HeartbeatKey(instanceID)).Err()
}

// BridgeIDs returns the instance ids in BridgesSet.
func (s *Store) BridgeIDs(ctx context.Context) ([]string, error) {
	ids, err := s.rdb.SMembers(ctx, BridgesSet).Result()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", BridgesSet, err)
	}
	return ids, nil
}

// adoptLua moves up to ARGV[1] ids from an orphaned processing list to this
// instance's, oldest first so their order is kept. Checking the owner's
// heartbeat inside the script closes the race with an owner that comes back
// between the caller's scan and the move.
//
//	KEYS = [orphan list, own list, orphan heartbeat (absent for the legacy list)]
//	returns the number moved, or -1 when the owner is alive.
var adoptLua = redis.NewScript(`
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
`)

// Adopt moves up to max ids from the orphan list into own, oldest first,
// unless heartbeat (when not "") exists: alive is then true and nothing
// moves. A key of another type than a list moves nothing.
func (s *Store) Adopt(ctx context.Context, orphan, own, heartbeat string, max int) (moved int, alive bool, err error) {
	keys := []string{orphan, own}
	if heartbeat != "" {
		keys = append(keys, heartbeat)
	}
	n, err := adoptLua.Run(ctx, s.rdb, keys, max).Int()
	if err != nil {
		return 0, false, fmt.Errorf("adopt %s: %w", orphan, err)
	}
	if n < 0 {
		return 0, true, nil
	}
	return n, false, nil
}

// forgetBridgeLua drops a bridge from the registry once it is dead (no
// heartbeat) and its processing list is empty.
//
//	KEYS = [jetrelay:bridges, its heartbeat, its processing list]  ARGV = [id]
var forgetBridgeLua = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('LLEN', KEYS[3]) > 0 then return 0 end
return redis.call('SREM', KEYS[1], ARGV[1])
`)

// ForgetBridge removes instanceID from BridgesSet if its heartbeat expired
// and its processing list is empty, so the registry does not grow with every
// pod name a deployment ever used. It reports whether it did.
func (s *Store) ForgetBridge(ctx context.Context, instanceID string) (bool, error) {
	keys := []string{BridgesSet, HeartbeatKey(instanceID), ProcessingList(instanceID)}
	n, err := forgetBridgeLua.Run(ctx, s.rdb, keys, instanceID).Int()
	if err != nil {
		return false, fmt.Errorf("forget bridge %s: %w", strconv.Quote(instanceID), err)
	}
	return n == 1, nil
}

// requeueRetryBatchLua is the reference service's REQUEUE_RETRY_BATCH_LUA
// (v0.1.25.24, contract §10), verbatim: due ids leave dispatch:retry and
// enter dispatch:pending in one atomic step, so concurrent promoters never
// double-enqueue an id.
//
//	KEYS = [dispatch:retry, dispatch:pending]  ARGV = [now_ms, limit]
var requeueRetryBatchLua = redis.NewScript(`local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local moved = {}
for _, id in ipairs(ready) do
  if redis.call('ZREM', KEYS[1], id) > 0 then
    redis.call('LPUSH', KEYS[2], id)
    table.insert(moved, id)
  end
end
return moved`)

// PromoteScored moves up to limit ids of zset scored up to maxScore (epoch
// millis, or "+inf") into dispatch:pending with the reference's script and
// returns them: due ids of the legacy dispatch:retry ZSET, or everything an
// older jetrelay left in jetrelay:deferred.
func (s *Store) PromoteScored(ctx context.Context, zset, maxScore string, limit int) ([]string, error) {
	return requeueRetryBatchLua.Run(ctx, s.rdb, []string{zset, PendingList}, maxScore, limit).StringSlice()
}
