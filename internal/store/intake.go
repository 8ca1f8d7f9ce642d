package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/proto"
)

// Intake holds (docs/isolation.md, "Waiting at intake"). A subscription
// that cannot take deliveries now (its breaker is open, or its in-flight
// limit is full and its sends hang) costs the fleet what its work items
// cost to store, fetch, read, decide and write back, one by one: about
// half a delivery each. An engine that finds a subscription in that state
// writes one IntakeHold for it; while it lasts, bridges leave the
// subscription's never-sent deliveries in Redis, in its ParkedZSet scored
// by the time each must be handled at the latest, instead of publishing
// them. It is the stream's back-pressure (queue.Room), per subscription.
const (
	// IntakeHolds is the HASH subscription id → IntakeHold (JSON).
	IntakeHolds = "jetrelay:intake:holds"
	// ParkedSubscriptions is the SET of subscriptions with parked ids.
	ParkedSubscriptions = "jetrelay:intake:parked"
)

// ParkedZSet is the ZSET of subscription sub's parked delivery ids, each
// scored with the epoch millis by which it must be back in the queue: the
// end of its retry schedule, or its stale cutoff if earlier.
func ParkedZSet(sub string) string { return "jetrelay:intake:parked:" + sub }

// IntakeHold is why and until when bridges park a subscription's new
// deliveries.
type IntakeHold struct {
	// Reason is the engine's put-off reason (breaker_open,
	// subscription_busy).
	Reason string `json:"reason"`
	// Since is when the hold was first written; Until is when it ends
	// unless an engine renews it.
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Span is how long after its attempted_at a never-sent delivery of the
	// subscription must be handled at the latest (its schedule end or its
	// stale cutoff): a parked id's score.
	Span time.Duration `json:"span"`
	// Grace is how long past Until bridges keep parking and probing one
	// id at a time before they drop a hold no engine renewed: longer than
	// a probe's send may take.
	Grace time.Duration `json:"grace"`
}

// SetIntakeHold writes sub's hold.
func (s *Store) SetIntakeHold(ctx context.Context, sub string, h IntakeHold) error {
	raw, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := s.rdb.HSet(ctx, IntakeHolds, sub, raw).Err(); err != nil {
		return fmt.Errorf("store: %s: %w", IntakeHolds, err)
	}
	return nil
}

// ClearIntakeHold removes sub's hold: bridges then publish its parked ids.
func (s *Store) ClearIntakeHold(ctx context.Context, sub string) error {
	if err := s.rdb.HDel(ctx, IntakeHolds, sub).Err(); err != nil {
		return fmt.Errorf("store: %s: %w", IntakeHolds, err)
	}
	return nil
}

// IntakeHoldsAll reads every hold. An entry that does not parse is left
// out: a subscription without a readable hold is not held.
func (s *Store) IntakeHoldsAll(ctx context.Context) (map[string]IntakeHold, error) {
	all, err := s.rdb.HGetAll(ctx, IntakeHolds).Result()
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", IntakeHolds, err)
	}
	out := make(map[string]IntakeHold, len(all))
	for sub, raw := range all {
		var h IntakeHold
		if json.Unmarshal([]byte(raw), &h) == nil && !h.Until.IsZero() {
			out[sub] = h
		}
	}
	return out, nil
}

// IntakeHoldOf reads sub's hold.
func (s *Store) IntakeHoldOf(ctx context.Context, sub string) (IntakeHold, bool, error) {
	raw, err := s.rdb.HGet(ctx, IntakeHolds, sub).Result()
	switch {
	case err == redis.Nil:
		return IntakeHold{}, false, nil
	case err != nil:
		return IntakeHold{}, false, fmt.Errorf("store: %s: %w", IntakeHolds, err)
	}
	var h IntakeHold
	if err := json.Unmarshal([]byte(raw), &h); err != nil || h.Until.IsZero() {
		return IntakeHold{}, false, nil
	}
	return h, true, nil
}

// ParkedID is one delivery to park: its id and subscription, its record as
// the bridge read it, and the epoch millis it must be back by.
type ParkedID struct {
	ID, SubID string
	Reason    string // the hold's, written in the record's wait note
	Raw       string
	DueMs     int64
}

// parkLua parks the deliveries of one subscription whose records are
// unchanged since the bridge read them: each record gets its wait note
// (KEYS[i] set to the record given when the SHA-1 of what it holds is the
// one given: half the bytes of sending the record as read) and its id is
// added to the subscription's ParkedZSet with the score given. It returns
// one code per record: 1 parked, 0 changed underneath, -1 gone (those two
// are not parked: the caller publishes them).
//
//	KEYS = [record 1..n, parked zset, ParkedSubscriptions]  ARGV = [sub, (sha1 of old, new, score, id) per record... ]
var parkLua = redis.NewScript(`
local n = #KEYS - 2
local zset, subs = KEYS[n+1], KEYS[n+2]
local out, parked = {}, 0
for i = 1, n do
  local j = 2 + 4*(i-1)
  local cur = redis.call('GET', KEYS[i])
  if not cur then
    out[i] = -1
  elseif redis.sha1hex(cur) ~= ARGV[j] then
    out[i] = 0
  else
    redis.call('SET', KEYS[i], ARGV[j+1], 'KEEPTTL')
    redis.call('ZADD', zset, ARGV[j+2], ARGV[j+3])
    out[i] = 1
    parked = parked + 1
  end
end
if parked > 0 then
  redis.call('SADD', subs, ARGV[1])
end
return out
`)

// waitFields is the wait note of a parked delivery (the fields the
// engine's own put-offs write) and unwaitFields what releases it: a record
// that still named a future next_retry_at would be taken by the engine for
// an early copy and put off again.
func waitFields(reason string, due time.Time) Patch {
	return Patch{{Name: "next_retry_at", Value: proto.MillisInstant(due)}, {Name: "jetrelay_waiting", Value: reason}}
}

var unwaitFields = Patch{{Name: "next_retry_at", Value: nil}, {Name: "jetrelay_waiting", Value: nil}}

// Park parks ids (store.IntakeHold), one script call per subscription, and
// returns those it parked; the others' records changed since they were
// read, and the caller publishes them. The caller removes the parked ids
// from its processing list afterwards: until then an id is in both, and a
// crash in between publishes it once more, which the engine settles as a
// duplicate.
func (s *Store) Park(ctx context.Context, ids []ParkedID) ([]string, error) {
	bySub := map[string][]ParkedID{}
	var order []string
	for _, p := range ids {
		if _, ok := bySub[p.SubID]; !ok {
			order = append(order, p.SubID)
		}
		bySub[p.SubID] = append(bySub[p.SubID], p)
	}
	var parked []string
	for _, sub := range order {
		group := bySub[sub]
		keys := make([]string, 0, len(group)+2)
		args := make([]any, 0, 1+4*len(group))
		args = append(args, sub)
		for _, p := range group {
			next, err := waitFields(p.Reason, time.UnixMilli(p.DueMs)).apply([]byte(p.Raw))
			if err != nil {
				continue // not a record the note fits in: published as it is
			}
			keys = append(keys, DeliveryKey(p.ID))
			sum := sha1.Sum([]byte(p.Raw))
			args = append(args, hex.EncodeToString(sum[:]), next, p.DueMs, p.ID)
		}
		if len(keys) == 0 {
			continue
		}
		n := len(keys)
		keys = append(keys, ParkedZSet(sub), ParkedSubscriptions)
		codes, err := parkLua.Run(ctx, s.rdb, keys, args...).Int64Slice()
		if err != nil {
			return parked, fmt.Errorf("store: park %d deliveries of %s: %w", n, strconv.Quote(sub), err)
		}
		for i, c := range codes {
			if c == 1 && i < n {
				parked = append(parked, args[4+4*i].(string))
			}
		}
	}
	return parked, nil
}

// ParkedDue returns up to limit of sub's parked ids scored up to maxScore
// (epoch millis, or "+inf"), lowest score first.
func (s *Store) ParkedDue(ctx context.Context, sub, maxScore string, limit int) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, ParkedZSet(sub), &redis.ZRangeBy{Min: "-inf", Max: maxScore, Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", ParkedZSet(sub), err)
	}
	return ids, nil
}

// unwaitLua takes the wait note off records that still hold what the
// caller read (ARGV[2i-1] becomes ARGV[2i] at KEYS[i]); others are left.
var unwaitLua = redis.NewScript(`
for i = 1, #KEYS do
  if ARGV[2*i-1] ~= '' and redis.call('GET', KEYS[i]) == ARGV[2*i-1] then
    redis.call('SET', KEYS[i], ARGV[2*i], 'KEEPTTL')
  end
end
return #KEYS
`)

// Unwait takes the wait note off parked deliveries' records before a
// bridge publishes them: a record that still named a future
// next_retry_at would be taken by the engine for an early copy and put
// off again. A record changed since (or gone) is left as it is.
func (s *Store) Unwait(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = DeliveryKey(id)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return fmt.Errorf("store: read parked records: %w", err)
	}
	args := make([]any, 0, 2*len(ids))
	for i := range ids {
		old, next := "", ""
		if raw, ok := vals[i].(string); ok {
			if b, err := unwaitFields.apply([]byte(raw)); err == nil {
				old, next = raw, string(b)
			}
		}
		args = append(args, old, next)
	}
	if err := unwaitLua.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("store: take the wait note off parked records: %w", err)
	}
	return nil
}

// OldestParked returns up to n of sub's parked ids, lowest score first.
func (s *Store) OldestParked(ctx context.Context, sub string, n int) ([]string, error) {
	return s.ParkedDue(ctx, sub, "+inf", n)
}

// unparkLua removes parked ids (published meanwhile) and drops the
// subscription from ParkedSubscriptions once nothing is left.
//
//	KEYS = [parked zset, ParkedSubscriptions]  ARGV = [sub, id...]
var unparkLua = redis.NewScript(`
for i = 2, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
end
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[1])
end
return 1
`)

// Unpark removes ids from sub's parked ids once they were published.
func (s *Store) Unpark(ctx context.Context, sub string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, 1+len(ids))
	args = append(args, sub)
	for _, id := range ids {
		args = append(args, id)
	}
	if err := unparkLua.Run(ctx, s.rdb, []string{ParkedZSet(sub), ParkedSubscriptions}, args...).Err(); err != nil {
		return fmt.Errorf("store: unpark %d ids of %s: %w", len(ids), strconv.Quote(sub), err)
	}
	return nil
}

// ParkedSubs lists the subscriptions with parked ids.
func (s *Store) ParkedSubs(ctx context.Context) ([]string, error) {
	subs, err := s.rdb.SMembers(ctx, ParkedSubscriptions).Result()
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", ParkedSubscriptions, err)
	}
	return subs, nil
}

// ParkedCounts is how many ids each subscription with parked ids has
// parked.
func (s *Store) ParkedCounts(ctx context.Context) (map[string]int64, error) {
	subs, err := s.ParkedSubs(ctx)
	if err != nil || len(subs) == 0 {
		return nil, err
	}
	cmds := make([]*redis.IntCmd, len(subs))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sub := range subs {
			cmds[i] = p.ZCard(ctx, ParkedZSet(sub))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: count parked ids: %w", err)
	}
	out := make(map[string]int64, len(subs))
	for i, sub := range subs {
		if n := cmds[i].Val(); n > 0 {
			out[sub] = n
		}
	}
	return out, nil
}

// ParkedCount is how many ids sub has parked.
func (s *Store) ParkedCount(ctx context.Context, sub string) (int64, error) {
	return s.rdb.ZCard(ctx, ParkedZSet(sub)).Result()
}

// ParkedAt reports whether delivery id is parked for sub, and by when it
// must be back in the queue.
func (s *Store) ParkedAt(ctx context.Context, sub, id string) (time.Time, bool, error) {
	score, err := s.rdb.ZScore(ctx, ParkedZSet(sub), id).Result()
	switch {
	case err == redis.Nil:
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, fmt.Errorf("store: look for %s among parked ids: %w", strconv.Quote(id), err)
	}
	return time.UnixMilli(int64(score)).UTC(), true, nil
}
