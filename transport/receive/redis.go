package receive

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisTTL is how long RedisStore remembers a processed event id:
// longer than the sender's 24 h delivery window, so every retry and most
// replays of an event find it.
const DefaultRedisTTL = 72 * time.Hour

// DefaultRedisPrefix starts every key RedisStore writes.
const DefaultRedisPrefix = "receive:event:"

// doneValue marks a processed event; a claim holds its token instead.
const doneValue = "done"

// RedisStore is a Store in Redis: one key per event id, set with SET NX and
// a TTL. A claim holds the claim's token for the lease; a completed event
// holds "done" for the TTL. Safe for concurrent use by many processes.
type RedisStore struct {
	client redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// RedisOption configures a RedisStore.
type RedisOption func(*RedisStore)

// WithRedisTTL sets how long a processed event id is remembered
// (DefaultRedisTTL when d <= 0).
func WithRedisTTL(d time.Duration) RedisOption {
	return func(s *RedisStore) {
		if d > 0 {
			s.ttl = d
		}
	}
}

// WithRedisPrefix sets the key prefix (DefaultRedisPrefix when empty).
func WithRedisPrefix(p string) RedisOption {
	return func(s *RedisStore) {
		if p != "" {
			s.prefix = p
		}
	}
}

// NewRedisStore returns a Store keeping event ids in client's Redis.
func NewRedisStore(client redis.UniversalClient, opts ...RedisOption) *RedisStore {
	s := &RedisStore{client: client, prefix: DefaultRedisPrefix, ttl: DefaultRedisTTL}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Claim implements Store with SET key token NX PX lease. A key that already
// exists is "done" (Done) or another claim's token (InProgress); an expired
// claim has expired from Redis, so it is simply claimed again.
func (s *RedisStore) Claim(ctx context.Context, eventID, token string, lease time.Duration) (ClaimState, error) {
	key := s.prefix + eventID
	for range 3 {
		ok, err := s.client.SetNX(ctx, key, token, lease).Result()
		if err != nil {
			return 0, err
		}
		if ok {
			return Claimed, nil
		}
		v, err := s.client.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			continue // released or expired between the two calls: try again
		}
		if err != nil {
			return 0, err
		}
		if v == doneValue {
			return Done, nil
		}
		return InProgress, nil
	}
	return InProgress, nil
}

// Complete implements Store: the key becomes "done" for the TTL.
func (s *RedisStore) Complete(ctx context.Context, eventID, _ string) error {
	return s.client.Set(ctx, s.prefix+eventID, doneValue, s.ttl).Err()
}

// releaseScript deletes a claim only while it is still the caller's.
var releaseScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// Release implements Store: the key is deleted if it still holds token.
func (s *RedisStore) Release(ctx context.Context, eventID, token string) error {
	return releaseScript.Run(ctx, s.client, []string{s.prefix + eventID}, token).Err()
}
