// Package redisstore is a receive.Store in Redis: one key per event id, set
// with SET NX and a TTL. It lives apart from package receive so a receiver
// that only verifies signatures does not link go-redis.
package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/transport/receive"
)

// DefaultTTL is how long Store remembers a processed event id
// (receive.DefaultTTL).
const DefaultTTL = receive.DefaultTTL

// DefaultPrefix starts every key Store writes.
const DefaultPrefix = "receive:event:"

// doneValue marks a processed event; a claim holds its token instead.
const doneValue = "done"

// Store is a Store in Redis: one key per event id, set with SET NX and
// a TTL. A claim holds the claim's token for the lease; a completed event
// holds "done" for the TTL. Safe for concurrent use by many processes.
type Store struct {
	client redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// Option configures a Store.
type Option func(*Store)

// WithTTL sets how long a processed event id is remembered
// (DefaultTTL when d <= 0).
func WithTTL(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.ttl = d
		}
	}
}

// WithPrefix sets the key prefix (DefaultPrefix when empty).
func WithPrefix(p string) Option {
	return func(s *Store) {
		if p != "" {
			s.prefix = p
		}
	}
}

// New returns a Store keeping event ids in client's Redis.
func New(client redis.UniversalClient, opts ...Option) *Store {
	s := &Store{client: client, prefix: DefaultPrefix, ttl: DefaultTTL}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Claim implements receive.Store with SET key token NX PX lease. A key that already
// exists is "done" (Done) or another claim's token (InProgress); an expired
// claim has expired from Redis, so it is simply claimed again.
func (s *Store) Claim(ctx context.Context, eventID, token string, lease time.Duration) (receive.ClaimState, error) {
	key := s.prefix + eventID
	for range 3 {
		ok, err := s.client.SetNX(ctx, key, token, lease).Result()
		if err != nil {
			return 0, err
		}
		if ok {
			return receive.Claimed, nil
		}
		v, err := s.client.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			continue // released or expired between the two calls: try again
		}
		if err != nil {
			return 0, err
		}
		if v == doneValue {
			return receive.Done, nil
		}
		return receive.InProgress, nil
	}
	return receive.InProgress, nil
}

// Complete implements receive.Store: the key becomes "done" for the TTL.
func (s *Store) Complete(ctx context.Context, eventID, _ string) error {
	return s.client.Set(ctx, s.prefix+eventID, doneValue, s.ttl).Err()
}

// releaseScript deletes a claim only while it is still the caller's.
var releaseScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// Release implements receive.Store: the key is deleted if it still holds token.
func (s *Store) Release(ctx context.Context, eventID, token string) error {
	return releaseScript.Run(ctx, s.client, []string{s.prefix + eventID}, token).Err()
}
