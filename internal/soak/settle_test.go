package soak

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/redisproc"
)

// A redis-server killed just before settlement (seed 44's last fault) must
// not stop the run: go-redis keeps returning the last dial error for up to
// a second after the server is back, and settlement waits through it.
func TestAwaitRedis_WaitsOutAKillAndTheClientsDialErrors(t *testing.T) {
	ctx := context.Background()
	srv, err := redisproc.Start(ctx, redisproc.Options{Dir: t.TempDir(), AppendOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, PoolSize: 2})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Set(ctx, "webhook:sub_1", "kept", 0).Err(); err != nil {
		t.Fatal(err)
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if srv.Running() {
		t.Fatal("Running() after Kill")
	}
	// As the load does while Redis is down: enough failed dials to open
	// the client pool's dial breaker.
	for range 4 {
		if err := rdb.Ping(ctx).Err(); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("Ping with redis-server down: %v, want connection refused", err)
		}
	}
	if err := awaitRedis(ctx, rdb, 200*time.Millisecond); err == nil {
		t.Fatal("awaitRedis with redis-server down succeeded")
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if !srv.Running() {
		t.Fatal("not Running() after Restart")
	}
	if err := awaitRedis(ctx, rdb, redisPatience); err != nil {
		t.Fatalf("awaitRedis after the restart: %v", err)
	}
	got, err := rdb.Get(ctx, "webhook:sub_1").Result()
	if err != nil || got != "kept" {
		t.Fatalf("after awaitRedis: Get = %q, %v; want the record written before the kill", got, err)
	}
}
