package soak

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/redisproc"
)

// A redis-server killed just before settlement (seed 44's last fault) must
// not stop the run: go-redis keeps returning the last dial error for up to
// a second after the server is back, and settlement waits through it (and
// the duplicate bound counts it as part of the outage).
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

	killed := time.Now()
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
	restarted := time.Now()
	if err := awaitRedis(ctx, rdb, redisPatience); err != nil {
		t.Fatalf("awaitRedis after the restart: %v", err)
	}
	// Until here an outcome write would have failed and its send been
	// repeated: the soak's duplicate bound must count this stretch as the
	// outage's.
	if answered, end := time.Now(), exposureEnd(KillRedis, killed, restarted); end.Before(answered) {
		t.Errorf("the client answered %s after the restart, but the outage's exposure window ends %s after it",
			answered.Sub(restarted).Round(time.Millisecond), end.Sub(restarted))
	}
	got, err := rdb.Get(ctx, "webhook:sub_1").Result()
	if err != nil || got != "kept" {
		t.Fatalf("after awaitRedis: Get = %q, %v; want the record written before the kill", got, err)
	}
}

// A run that stopped before its checks must not read as a pass, in the
// terminal or in docs/reliability.md.
func TestReport_UncheckedRunIsNotAPass(t *testing.T) {
	r := &Report{Seed: 44, Duration: 10 * time.Minute, Faults: map[Kind]int{KillRedis: 1}}
	if r.OK() {
		t.Fatal("OK() for a run whose checks never ran")
	}
	if sum := r.Summary(); !strings.Contains(sum, "NOT CHECKED") || strings.Contains(sum, "every check held") {
		t.Fatalf("summary of an unchecked run:\n%s", sum)
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "Verdict: none") || strings.Contains(md.String(), "| held |") {
		t.Fatalf("markdown of an unchecked run:\n%s", md.String())
	}
	r.Checked = true
	if !r.OK() || !strings.Contains(r.Summary(), "every check held") {
		t.Fatalf("a checked run without violations:\n%s", r.Summary())
	}
}
