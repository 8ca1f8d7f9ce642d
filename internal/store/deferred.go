package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// DeferredZSet parks deliveries the engine put off (an open circuit breaker,
// a paused subscription, a subscription at its in-flight limit, a long retry
// delay) without holding a JetStream ack-pending slot for the whole wait.
// Members are delivery ids, scores the epoch millis they are due; the bridge
// brings due ones back into the stream.
const DeferredZSet = "jetrelay:deferred"

// Deferred is one parked delivery and the time it is due.
type Deferred struct {
	ID        string
	DueMillis int64
}

// Defer parks delivery id until the given time. Parking it again replaces
// the due time.
func (s *Store) Defer(ctx context.Context, id string, until time.Time) error {
	if err := s.rdb.ZAdd(ctx, DeferredZSet, redis.Z{Score: float64(until.UnixMilli()), Member: id}).Err(); err != nil {
		return fmt.Errorf("store: defer %s: %w", strconv.Quote(id), err)
	}
	return nil
}

// DueDeferred lists up to limit parked deliveries due at now, earliest first.
func (s *Store) DueDeferred(ctx context.Context, now time.Time, limit int64) ([]Deferred, error) {
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, DeferredZSet, &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: limit,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", DeferredZSet, err)
	}
	out := make([]Deferred, 0, len(zs))
	for _, z := range zs {
		id, _ := z.Member.(string)
		out = append(out, Deferred{ID: id, DueMillis: int64(z.Score)})
	}
	return out, nil
}

// forgetDeferredLua removes a parked delivery only if it is still parked for
// the same due time: a re-park in between (a newer deferral) must stay.
const forgetDeferredLua = `local n = 0
for i = 1, #ARGV, 2 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) == tonumber(ARGV[i+1]) then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n`

// ForgetDeferred removes deliveries that were brought back, unless they
// have been parked again since with another due time.
func (s *Store) ForgetDeferred(ctx context.Context, ds []Deferred) error {
	if len(ds) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(ds))
	for _, d := range ds {
		args = append(args, d.ID, d.DueMillis)
	}
	if err := s.forgetDeferred.Run(ctx, s.rdb, []string{DeferredZSet}, args...).Err(); err != nil {
		return fmt.Errorf("store: forget deferred: %w", err)
	}
	return nil
}
