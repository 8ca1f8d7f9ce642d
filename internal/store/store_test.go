package store

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/testenv"
)

// newStore returns a Store over a fresh redis-server and a client for
// arranging and inspecting the keyspace directly.
func newStore(t *testing.T) (*Store, *redis.Client, *testenv.RedisEnv) {
	t.Helper()
	env := testenv.Redis(t)
	return New(env.Client), env.Client, env
}

func mustSet(t *testing.T, c *redis.Client, key, value string) {
	t.Helper()
	if err := c.Set(context.Background(), key, value, 0).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

func mustGet(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// ttlSeconds is the raw TTL reply: -1 no expiry, -2 no key.
func ttlSeconds(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), "TTL", key).Int64()
	if err != nil {
		t.Fatalf("TTL %s: %v", key, err)
	}
	return n
}
