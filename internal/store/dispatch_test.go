package store

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/testenv"
)

// The bridge's moves go through these: ids move oldest first, adoption
// stops at a live owner, and a dead, empty bridge leaves the registry.
func TestDispatch_MovesAdoptsAndForgetsBridgesByTheirKeys(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	c.LPush(ctx, PendingList, "a", "b", "c") // "a" is the oldest
	ids, _, err := st.MovePending(ctx, ProcessingList("me"), 2)
	if err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("MovePending = %q, %v; want the two oldest, a and b", ids, err)
	}
	if got, _ := c.LRange(ctx, "dispatch:processing:me", 0, -1).Result(); len(got) != 2 {
		t.Errorf("processing list dispatch:processing:me = %q, want 2 ids", got)
	}

	if err := st.Beat(ctx, "alive", "pid=1", time.Minute); err != nil {
		t.Fatal(err)
	}
	c.LPush(ctx, ProcessingList("alive"), "x")
	if n, alive, err := st.Adopt(ctx, ProcessingList("alive"), ProcessingList("me"), HeartbeatKey("alive"), 10); err != nil || !alive || n != 0 {
		t.Errorf("Adopt of a live bridge's list = %d, alive %v, %v; want nothing moved", n, alive, err)
	}
	if err := st.StopBeating(ctx, "alive"); err != nil {
		t.Fatal(err)
	}
	if n, alive, err := st.Adopt(ctx, ProcessingList("alive"), ProcessingList("me"), HeartbeatKey("alive"), 10); err != nil || alive || n != 1 {
		t.Errorf("Adopt of a dead bridge's list = %d, alive %v, %v; want its one id", n, alive, err)
	}
	if forgot, err := st.ForgetBridge(ctx, "alive"); err != nil || !forgot {
		t.Fatalf("ForgetBridge of a dead bridge with an empty list = %v, %v; want forgotten", forgot, err)
	}
	if members, _ := st.BridgeIDs(ctx); slices.Contains(members, "alive") {
		t.Errorf("jetrelay:bridges = %q still lists the dead bridge with an empty list", members)
	}
}

func TestTraceOrigins_UseTheInboundFlagsOnlyWhenAdminSawAValidTraceparent(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	mustSet(t, c, DeliveryKey("valid"), `{"trace_id":"0af7651916cd43dd8448eb211c80319c","trace_flags":"00","traceparent_inbound_valid":true}`)
	mustSet(t, c, DeliveryKey("invalid"), `{"trace_id":"0af7651916cd43dd8448eb211c80319c","trace_flags":"00","traceparent_inbound_valid":false}`)
	got, err := st.TraceOrigins(ctx, []string{"valid", "invalid", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceOrigin{{TraceID: "0af7651916cd43dd8448eb211c80319c", Flags: "00"}, {TraceID: "0af7651916cd43dd8448eb211c80319c", Flags: "01"}, {}}
	for i := range got {
		got[i].Raw = "" // the record as read, for a bridge that parks it
	}
	if !slices.Equal(got, want) {
		t.Errorf("TraceOrigins = %+v, want %+v", got, want)
	}
}

// A batch moves with a fixed number of commands, leaving the lists as one
// LMOVE per id would, and never pops ids it cannot put down.
func TestMovePending_MovesABatchInOrderWithoutLosingIds(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	c.LPush(ctx, PendingList, "a", "b", "c", "d") // "a" is the oldest
	c.LPush(ctx, ProcessingList("me"), "old")
	ids, _, err := st.MovePending(ctx, ProcessingList("me"), 3)
	if err != nil || !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("MovePending = %q, %v; want a, b, c", ids, err)
	}
	if got := c.LRange(ctx, ProcessingList("me"), 0, -1).Val(); !slices.Equal(got, []string{"c", "b", "a", "old"}) {
		t.Errorf("processing list = %q, want c b a old (as LMOVE RIGHT LEFT one by one)", got)
	}
	if got := c.LRange(ctx, PendingList, 0, -1).Val(); !slices.Equal(got, []string{"d"}) {
		t.Errorf("pending = %q, want d", got)
	}

	c.Set(ctx, ProcessingList("broken"), "x", 0)
	if _, _, err := st.MovePending(ctx, ProcessingList("broken"), 3); err == nil {
		t.Error("MovePending into a key that is not a list succeeded")
	}
	if got := c.LRange(ctx, PendingList, 0, -1).Val(); !slices.Equal(got, []string{"d"}) {
		t.Errorf("pending after a failed move = %q, want d still there", got)
	}
}

func TestRemoveFromList_RemovesOneOccurrenceOfEachId(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		list, ids  []string // list head first
		wantRemain []string
	}{
		{"the batch at the head", []string{"c", "b", "a", "old"}, []string{"a", "b", "c"}, []string{"old"}},
		{"part of the batch", []string{"c", "b", "a", "old"}, []string{"a", "c"}, []string{"b", "old"}},
		{"an id twice, removed once", []string{"a", "b", "a"}, []string{"a", "b"}, []string{"a"}},
		{"ids not at the head", []string{"x", "a", "b"}, []string{"b", "a"}, []string{"x"}},
		{"an id not there", []string{"a", "b"}, []string{"a", "z"}, []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Del(ctx, "l")
			for i := len(tc.list) - 1; i >= 0; i-- {
				c.LPush(ctx, "l", tc.list[i])
			}
			if failed, err := st.RemoveFromList(ctx, "l", tc.ids); err != nil || len(failed) > 0 {
				t.Fatalf("RemoveFromList = %q, %v", failed, err)
			}
			if got := c.LRange(ctx, "l", 0, -1).Val(); !slices.Equal(got, tc.wantRemain) {
				t.Errorf("list = %q, want %q", got, tc.wantRemain)
			}
		})
	}
}

// countingHook counts what a client sends: single commands and pipelines,
// one round trip each.
type countingHook struct{ commands, pipelines atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.commands.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		return next(ctx, cmds)
	}
}

// awaitAndMove is a waiting move with nothing to remove.
func awaitAndMove(ctx context.Context, st *Store, list string, max int, wait time.Duration) ([]string, error) {
	ids, _, _, err := st.MoveAfterRemoving(ctx, list, nil, max, wait)
	return ids, err
}

// countedRedis starts a Redis and returns a client of it and a second
// client whose round trips hook counts.
func countedRedis(t *testing.T) (c, plain *redis.Client, hook *countingHook) {
	t.Helper()
	c = testenv.Redis(t).Client
	hook = &countingHook{}
	plain = redis.NewClient(&redis.Options{Addr: c.Options().Addr})
	t.Cleanup(func() { _ = plain.Close() })
	plain.AddHook(hook)
	return c, plain, hook
}

// awaitBlocked waits until a client is blocked in a BLMOVE on c's server.
func awaitBlocked(t *testing.T, c *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if info := c.Info(context.Background(), "clients").Val(); strings.Contains(info, "blocked_clients:1") {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("no client blocked in BLMOVE within 5 s")
}

// The bridge's move on an all but empty list waits for an id and takes it
// with whatever else came in one round trip, leaving the lists as one
// LMOVE per id would; a client whose ReadTimeout would cut the wait short,
// and a flushed script cache, still move every id.
func TestMoveAfterRemoving_WaitsForAnIdAndTakesTheRestInOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	c, plain, hook := countedRedis(t)
	st := New(plain)

	c.LPush(ctx, ProcessingList("me"), "old")
	got := make(chan []string, 1)
	go func() {
		ids, err := awaitAndMove(ctx, st, ProcessingList("me"), 3, 3*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- ids
	}()
	awaitBlocked(t, c)
	c.LPush(ctx, PendingList, "a") // what the wait takes
	ids := <-got
	if !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("waiting MoveAfterRemoving on an empty list = %q, want the one id pushed while it waited", ids)
	}

	c.LPush(ctx, PendingList, "b", "c", "d", "e") // "b" is the oldest
	hook.commands.Store(0)
	hook.pipelines.Store(0)
	ids, err := awaitAndMove(ctx, st, ProcessingList("me"), 3, time.Second)
	if err != nil || !slices.Equal(ids, []string{"b", "c", "d"}) {
		t.Fatalf("waiting MoveAfterRemoving = %q, %v; want b, c, d", ids, err)
	}
	if n, p := hook.commands.Load(), hook.pipelines.Load(); n != 0 || p != 1 {
		t.Errorf("waiting MoveAfterRemoving took %d commands and %d pipelines, want one pipeline", n, p)
	}
	if got := c.LRange(ctx, ProcessingList("me"), 0, -1).Val(); !slices.Equal(got, []string{"d", "c", "b", "a", "old"}) {
		t.Errorf("processing list = %q, want d c b a old (as LMOVE RIGHT LEFT one by one)", got)
	}

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c.LPush(ctx, PendingList, "f")
	if ids, err := awaitAndMove(ctx, st, ProcessingList("me"), 3, time.Second); err != nil || !slices.Equal(ids, []string{"e", "f"}) {
		t.Errorf("waiting MoveAfterRemoving after SCRIPT FLUSH = %q, %v; want e, f", ids, err)
	}

	// ReadTimeout 500 ms: a pipeline would give up on a 1 s wait.
	short := redis.NewClient(&redis.Options{Addr: c.Options().Addr, ReadTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = short.Close() })
	sst := New(short)
	go func() {
		ids, err := awaitAndMove(ctx, sst, ProcessingList("me"), 3, time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- ids
	}()
	awaitBlocked(t, c)
	c.LPush(ctx, PendingList, "g")
	if ids := <-got; !slices.Equal(ids, []string{"g"}) {
		t.Errorf("waiting MoveAfterRemoving with a short ReadTimeout = %q, want g", ids)
	}
	if got := c.LLen(ctx, ProcessingList("me")).Val(); got != 8 {
		t.Errorf("processing list holds %d ids, want all 7 moved and old", got)
	}
}

// The published batch leaves the processing list in the same round trip as
// the next move, before anything new is pushed onto it: waiting or not, a
// first removal (its script loaded on its own round trip, so it never runs
// after the move), a flushed script cache, a removal that fails (reported,
// and the move still made) and a client that cannot pipeline a blocking
// wait.
func TestMoveAfterRemoving_RemovesThePublishedBatchAndMovesTheNextInOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	c, plain, hook := countedRedis(t)
	st := New(plain)
	list := ProcessingList("me")
	lrange := func() []string { return c.LRange(ctx, list, 0, -1).Val() }

	// "left" was moved earlier and is not published: it must stay. The
	// first removal goes on its own, loading its script (a pipelined one
	// that the script cache lacked would run only after the move).
	c.LPush(ctx, list, "left", "p0") // p0 a published batch, at the head
	c.LPush(ctx, PendingList, "p1", "p2")
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if ids, _, removeErr, err := st.MoveAfterRemoving(ctx, list, []string{"p0"}, 3, 0); err != nil || removeErr != nil || !slices.Equal(ids, []string{"p1", "p2"}) {
		t.Fatalf("first MoveAfterRemoving = %q, %v, %v; want p1, p2", ids, removeErr, err)
	}
	if got := lrange(); !slices.Equal(got, []string{"p2", "p1", "left"}) {
		t.Fatalf("processing list = %q, want p2 p1 left", got)
	}

	// From then on, one round trip.
	c.LPush(ctx, PendingList, "a", "b")
	// The connections' own handshakes (pipelines have a pool of their own)
	// are not the move's.
	if _, err := plain.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	hook.commands.Store(0)
	hook.pipelines.Store(0)
	ids, _, removeErr, err := st.MoveAfterRemoving(ctx, list, []string{"p1", "p2"}, 3, 0)
	if err != nil || removeErr != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("MoveAfterRemoving = %q, %v, %v; want a, b", ids, removeErr, err)
	}
	if n, p := hook.commands.Load(), hook.pipelines.Load(); n != 0 || p != 1 {
		t.Errorf("took %d commands and %d pipelines, want one pipeline", n, p)
	}
	if got := lrange(); !slices.Equal(got, []string{"b", "a", "left"}) {
		t.Errorf("processing list = %q, want b a left: the published batch gone, the moved ids on top", got)
	}

	// Waiting: the removal runs at once, ahead of the blocked BLMOVE.
	got := make(chan []string, 1)
	go func() {
		ids, _, removeErr, err := st.MoveAfterRemoving(ctx, list, []string{"a", "b"}, 3, 3*time.Second)
		if err != nil || removeErr != nil {
			t.Error(removeErr, err)
		}
		got <- ids
	}()
	awaitBlocked(t, c)
	if l := lrange(); !slices.Equal(l, []string{"left"}) {
		t.Errorf("processing list while the move waits = %q, want only left (a and b removed before the wait)", l)
	}
	c.LPush(ctx, PendingList, "d")
	if ids := <-got; !slices.Equal(ids, []string{"d"}) {
		t.Fatalf("waiting MoveAfterRemoving = %q, want d", ids)
	}

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c.LPush(ctx, PendingList, "e")
	ids, _, removeErr, err = st.MoveAfterRemoving(ctx, list, []string{"d"}, 3, 0)
	if err != nil || removeErr != nil || !slices.Equal(ids, []string{"e"}) {
		t.Errorf("after SCRIPT FLUSH = %q, %v, %v; want e", ids, removeErr, err)
	}
	if l := lrange(); !slices.Equal(l, []string{"e", "left"}) {
		t.Errorf("processing list after SCRIPT FLUSH = %q, want e left", l)
	}

	// A removal that fails is reported and the move is still made: the
	// caller removes the ids later.
	c.Set(ctx, "not-a-list", "x", 0)
	if _, _, removeErr, err := st.MoveAfterRemoving(ctx, "not-a-list", []string{"e"}, 3, 0); removeErr == nil || err == nil {
		t.Errorf("removal from and move into a string key = %v, %v; want both to fail", removeErr, err)
	}
	c.LPush(ctx, PendingList, "f")
	ids, _, _, err = st.MoveAfterRemoving(ctx, list, nil, 3, 0)
	if err != nil || !slices.Equal(ids, []string{"f"}) {
		t.Errorf("move with nothing to remove = %q, %v; want f", ids, err)
	}

	// ReadTimeout 500 ms cannot pipeline a 1 s wait: two round trips, the
	// same lists.
	short := New(redis.NewClient(&redis.Options{Addr: c.Options().Addr, ReadTimeout: 500 * time.Millisecond}))
	go func() {
		ids, _, removeErr, err := short.MoveAfterRemoving(ctx, list, []string{"e", "f"}, 3, time.Second)
		if err != nil || removeErr != nil {
			t.Error(removeErr, err)
		}
		got <- ids
	}()
	awaitBlocked(t, c)
	c.LPush(ctx, PendingList, "g")
	if ids := <-got; !slices.Equal(ids, []string{"g"}) {
		t.Errorf("with a short ReadTimeout = %q, want g", ids)
	}
	if l := lrange(); !slices.Equal(l, []string{"g", "left"}) {
		t.Errorf("processing list = %q, want g left", l)
	}
}

// A removal made outside a move (a drain's, an adoption's) loads the
// removal script as a move's first removal does, so the next move carries
// its removal in its own round trip rather than making it on its own.
func TestMoveAfterRemoving_PipelinesItsRemovalAfterARemovalOutsideAMove(t *testing.T) {
	ctx := context.Background()
	c, plain, hook := countedRedis(t)
	st := New(plain)
	list := ProcessingList("me")
	c.LPush(ctx, list, "left", "p0")
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// A move with nothing to move or remove loads the move's script only.
	if ids, _, err := st.MovePending(ctx, list, 3); err != nil || len(ids) != 0 {
		t.Fatalf("MovePending = %q, %v", ids, err)
	}
	if failed, err := st.RemoveFromList(ctx, list, []string{"p0"}); err != nil || failed != nil {
		t.Fatalf("RemoveFromList = %q, %v", failed, err)
	}
	c.LPush(ctx, list, "p1")
	c.LPush(ctx, PendingList, "a")
	if _, err := plain.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	hook.commands.Store(0)
	hook.pipelines.Store(0)
	ids, _, removeErr, err := st.MoveAfterRemoving(ctx, list, []string{"p1"}, 3, 0)
	if err != nil || removeErr != nil || !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("MoveAfterRemoving = %q, %v, %v; want a", ids, removeErr, err)
	}
	if n, p := hook.commands.Load(), hook.pipelines.Load(); n != 0 || p != 1 {
		t.Errorf("took %d commands and %d pipelines, want one pipeline", n, p)
	}
	if got := c.LRange(ctx, list, 0, -1).Val(); !slices.Equal(got, []string{"a", "left"}) {
		t.Errorf("processing list = %q, want a left", got)
	}
}

// A move brings back the routing fields of every id it moved, read in the
// same round trip (the bridge then makes no MGET of its own): moving a
// batch, waiting for the first id (pipelined, and on a client that cannot
// pipeline a wait), and after the script cache was flushed. A missing
// record is a zero origin, as TraceOrigins reads it.
func TestMoveAfterRemoving_ReadsTheMovedIdsRecordsInTheSameRoundTrip(t *testing.T) {
	ctx := context.Background()
	c, plain, hook := countedRedis(t)
	st := New(plain)
	list := ProcessingList("me")
	record := func(id string) string {
		return `{"delivery_id":"` + id + `","subscription_id":"sub-` + id + `","event_id":"evt-` + id + `","trace_id":"0af7651916cd43dd8448eb211c80319c","trace_flags":"01","traceparent_inbound_valid":true}`
	}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "old"} {
		mustSet(t, c, DeliveryKey(id), record(id))
	}
	want := func(ids ...string) map[string]TraceOrigin {
		m := map[string]TraceOrigin{}
		for _, id := range ids {
			m[id] = TraceOrigin{TraceID: "0af7651916cd43dd8448eb211c80319c", Flags: "01", SubscriptionID: "sub-" + id, EventID: "evt-" + id}
		}
		return m
	}
	check := func(what string, origins map[string]TraceOrigin, ids ...string) {
		t.Helper()
		for id, o := range want(ids...) {
			got, ok := origins[id]
			if got.Raw == "" {
				t.Errorf("%s: origin of %s carries no record", what, id)
			}
			if got.Raw = ""; !ok || got != o {
				t.Errorf("%s: origin of %s = %+v (read: %v), want %+v", what, id, got, ok, o)
			}
		}
	}

	c.LPush(ctx, list, "old") // moved earlier, not published
	c.LPush(ctx, PendingList, "a", "b", "missing")
	if _, err := plain.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	ids, origins, _, err := st.MoveAfterRemoving(ctx, list, nil, 3, 0)
	if err != nil || !slices.Equal(ids, []string{"a", "b", "missing"}) {
		t.Fatalf("MoveAfterRemoving = %q, %v; want a, b, missing", ids, err)
	}
	check("a batch", origins, "a", "b")
	if o, ok := origins["missing"]; !ok || o != (TraceOrigin{}) {
		t.Errorf("origin of an id without a record = %+v (read: %v), want the zero origin", o, ok)
	}

	// Waiting: the id the wait took has its record read by the batch move
	// behind it. The first removal goes on its own round trip (loading its
	// script), so the wait and the move take two more; from then on the
	// removal, the wait and the move are one pipeline.
	got := make(chan map[string]TraceOrigin, 1)
	wait := func(done []string, push, wantID string) map[string]TraceOrigin {
		t.Helper()
		go func() {
			ids, origins, removeErr, err := st.MoveAfterRemoving(ctx, list, done, 3, 3*time.Second)
			if err != nil || removeErr != nil || !slices.Equal(ids, []string{wantID}) {
				t.Errorf("waiting MoveAfterRemoving = %q, %v, %v; want %s", ids, removeErr, err, wantID)
			}
			got <- origins
		}()
		awaitBlocked(t, c)
		c.LPush(ctx, PendingList, push)
		return <-got
	}
	check("a wait, its removal on its own", wait([]string{"a", "b", "missing"}, "c", "c"), "c")
	hook.commands.Store(0)
	hook.pipelines.Store(0)
	check("a wait", wait([]string{"c"}, "g", "g"), "g")
	if n, p := hook.commands.Load(), hook.pipelines.Load(); n != 0 || p != 1 {
		t.Errorf("waiting move took %d commands and %d pipelines, want one pipeline", n, p)
	}

	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c.LPush(ctx, PendingList, "d", "e")
	ids, origins, _, err = st.MoveAfterRemoving(ctx, list, []string{"g"}, 3, 0)
	if err != nil || !slices.Equal(ids, []string{"d", "e"}) {
		t.Fatalf("MoveAfterRemoving after SCRIPT FLUSH = %q, %v; want d, e", ids, err)
	}
	check("after SCRIPT FLUSH", origins, "d", "e")

	// A client that cannot pipeline the wait waits, then moves the rest
	// with the waited-for id's record.
	short := New(redis.NewClient(&redis.Options{Addr: c.Options().Addr, ReadTimeout: 500 * time.Millisecond}))
	go func() {
		ids, origins, _, err := short.MoveAfterRemoving(ctx, list, nil, 3, time.Second)
		if err != nil || !slices.Equal(ids, []string{"f"}) {
			t.Errorf("waiting MoveAfterRemoving with a short ReadTimeout = %q, %v; want f", ids, err)
		}
		got <- origins
	}()
	awaitBlocked(t, c)
	c.LPush(ctx, PendingList, "f")
	check("a wait on a short ReadTimeout", <-got, "f")
}
