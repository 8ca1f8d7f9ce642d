package store

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// lockedBuffer is a bytes.Buffer safe for go-redis's background goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestRouteRedisLogs_SendsGoRedisOwnLinesThroughTheStructuredLogger(t *testing.T) {
	var out lockedBuffer
	RouteRedisLogs(slog.New(slog.NewJSONHandler(&out, nil)))
	t.Cleanup(func() { RouteRedisLogs(slog.Default()) })

	// A port nothing listens on: go-redis's pool logs its failed dials.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), `"component":"redis"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no go-redis line reached the structured logger; got %q", out.String())
		}
		_ = rdb.Ping(context.Background()).Err()
	}
	if !strings.Contains(out.String(), `"level":"WARN"`) || !strings.Contains(out.String(), "dial") {
		t.Fatalf("unexpected line: %s", out.String())
	}
}
