package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// env is one Redis and one JetStream server for a test.
type env struct {
	redis *testenv.RedisEnv
	rdb   *redis.Client
	nc    *nats.Conn
	js    jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	t.Helper()
	r := testenv.Redis(t)
	_, nc, js := testenv.NATS(t)
	return &env{redis: r, rdb: r.Client, nc: nc, js: js}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) newBridge(t *testing.T, cfg bridge.Config) *bridge.Bridge {
	t.Helper()
	if cfg.InstanceID == "" {
		cfg.InstanceID = "test-bridge"
	}
	b, err := bridge.New(e.rdb, e.js, cfg)
	if err != nil {
		t.Fatalf("bridge.New: %v", err)
	}
	return b
}

// running is a bridge whose Run is in progress.
type running struct {
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// start runs b until stop is called or the test ends.
func start(t *testing.T, b *bridge.Bridge) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- b.Run(ctx) }()
	t.Cleanup(func() {
		if !r.stopped {
			r.stop(t)
		}
	})
	return r
}

// stop cancels Run, checks it returns nil, and says how long that took.
func (r *running) stop(t *testing.T) time.Duration {
	t.Helper()
	r.stopped = true
	began := time.Now()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run returned %v, want nil on shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
	}
	return time.Since(began)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (e *env) lpush(t *testing.T, key string, values []string) {
	t.Helper()
	if err := e.rdb.LPush(context.Background(), key, toAny(values)...).Err(); err != nil {
		t.Fatalf("LPUSH %s: %v", key, err)
	}
}

func (e *env) llen(t *testing.T, key string) int64 {
	t.Helper()
	n, err := e.rdb.LLen(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("LLEN %s: %v", key, err)
	}
	return n
}

// llens is the total length of keys read in one MULTI: a bridge moving ids
// from one list to the other between two separate LLENs (its move is one
// script) would make them look lost (seen once under load: 1 + 0 of 50).
func (e *env) llens(t *testing.T, keys ...string) int64 {
	t.Helper()
	cmds := make([]*redis.IntCmd, len(keys))
	if _, err := e.rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.LLen(context.Background(), k)
		}
		return nil
	}); err != nil {
		t.Fatalf("LLEN %v: %v", keys, err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n
}

func (e *env) lrange(t *testing.T, key string) []string {
	t.Helper()
	v, err := e.rdb.LRange(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %s: %v", key, err)
	}
	return v
}

// streamMsgs is how many messages the dispatch stream holds besides its
// keeper, or 0 while it does not exist yet.
func (e *env) streamMsgs(t *testing.T) uint64 {
	t.Helper()
	ctx := testCtx(t)
	st, err := e.js.Stream(ctx, queue.DefaultStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	n, err := queue.StoredMsgs(ctx, st, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// streamIDs counts each delivery id stored in the dispatch stream. It reads
// through a throwaway consumer that never acks, so the stream keeps them.
func (e *env) streamIDs(t *testing.T) map[string]int {
	t.Helper()
	ctx := testCtx(t)
	n := e.streamMsgs(t)
	c := queue.Config{}.WithDefaults()
	got := make(map[string]int, n)
	if n == 0 {
		return got
	}
	cons, err := e.js.CreateConsumer(ctx, queue.DefaultStream, jetstream.ConsumerConfig{
		Name: "test-reader", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: -1,
		FilterSubjects: []string{c.Subject, c.ScheduleSubjects(), c.HeldSubjects(""), c.OrderedSubjects()}, // not the keeper
	})
	if err != nil {
		t.Fatalf("reader consumer: %v", err)
	}
	defer e.js.DeleteConsumer(ctx, queue.DefaultStream, "test-reader")
	for read := uint64(0); read < n; {
		batch, err := cons.Fetch(int(n-read), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		fetched := 0
		for m := range batch.Messages() {
			fetched++
			id, err := queue.DeliveryID(m)
			if err != nil {
				t.Errorf("the engine would reject a stored work item: %v", err)
			}
			got[id]++
		}
		if fetched == 0 {
			t.Fatalf("read %d of %d stream msgs", read, n)
		}
		read += uint64(fetched)
	}
	return got
}

// assertExactlyOnce checks the stream holds exactly want, each once.
func (e *env) assertExactlyOnce(t *testing.T, want []string) {
	t.Helper()
	got := e.streamIDs(t)
	for _, id := range want {
		if got[id] != 1 {
			t.Errorf("id %s stored %d times, want once", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("stream holds %d distinct ids, want %d", len(got), len(want))
	}
}

// publishDirect stores ids the way a bridge does, as if published before a crash.
func (e *env) publishDirect(t *testing.T, ids []string) {
	t.Helper()
	ctx := testCtx(t)
	if _, err := queue.EnsureStream(ctx, e.js, queue.Config{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := e.js.PublishMsg(ctx, queue.NewMsg(queue.DefaultSubject, id)); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
}
