package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/redisproc"
)

// RedisEnv is a running redis-server and a client connected to it.
type RedisEnv struct {
	// Server is the child process; tests use it to Kill or Restart Redis.
	Server *redisproc.Server
	// Client talks to Server. It reconnects on its own after a Restart.
	Client *redis.Client
}

// Redis starts a redis-server for the test (at most one Options; the zero
// value is a throwaway in-memory server) and stops it when the test ends.
// A missing redis-server fails the test with instructions to install it,
// rather than skipping and silently testing nothing.
func Redis(t testing.TB, opts ...redisproc.Options) *RedisEnv {
	t.Helper()
	if len(opts) > 1 {
		t.Fatalf("testenv.Redis: at most one redisproc.Options, got %d", len(opts))
	}
	var o redisproc.Options
	if len(opts) == 1 {
		o = opts[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := redisproc.Start(ctx, o)
	if errors.Is(err, redisproc.ErrNotInstalled) {
		t.Fatalf("testenv: these tests need a real Redis: %v", err)
	}
	if err != nil {
		t.Fatalf("testenv: start redis-server: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("testenv: stop redis-server: %v", err)
		}
	})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: o.Password})
	t.Cleanup(func() { client.Close() })
	return &RedisEnv{Server: srv, Client: client}
}
