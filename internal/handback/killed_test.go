package handback_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/handback"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// An engine killed with SIGKILL leaves the items it held pending on the
// consumer, and those it had released with a delay too: the server keeps
// them there until they are acked, terminated or deleted. handback must not
// take that for a running engine, and must hand those items back.
func TestRun_AfterAnEngineWasKilledWithItemsInFlightAndNakedWorksOnceItsHeartbeatExpires(t *testing.T) {
	ctx := context.Background()
	w := &world{rdb: testenv.Redis(t).Client, qc: queue.Config{AckWait: time.Second}.WithDefaults()}
	srv, _, js := testenv.NATS(t)
	w.js = js
	var err error
	if w.s, err = queue.EnsureStream(ctx, w.js, w.qc); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("del_killed%08d", i)
		ids = append(ids, id)
		w.publish(t, queue.NewMsg(w.qc.Subject, id))
	}

	// The engine: its heartbeat, and 20 items taken on its own connection,
	// half released with a delay (a short retry), half still being sent.
	// 10 were never taken.
	const ttl = 1500 * time.Millisecond
	st := store.New(w.rdb)
	if err := st.BeatEngine(ctx, "engine-a", "pid=4242 host=node-1", ttl); err != nil {
		t.Fatal(err)
	}
	enc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	ejs, _ := jetstream.New(enc)
	cons, err := queue.EnsureConsumer(ctx, ejs, w.qc)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(20, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if n%2 == 0 {
			if err := m.NakWithDelay(time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		n++
	}
	if n != 20 {
		t.Fatalf("the engine took %d items, want 20", n)
	}
	if err := enc.Flush(); err != nil {
		t.Fatal(err)
	}
	enc.Close() // killed: nothing acked, nothing drained
	killed := time.Now()

	// While its heartbeat lasts, the engine counts as running, by name.
	_, err = handback.Run(ctx, w.rdb, w.js, handback.Config{Queue: w.qc})
	if !errors.Is(err, handback.ErrRunning) || !strings.Contains(err.Error(), "engine engine-a (pid=4242 host=node-1; heartbeat lasts until") {
		t.Fatalf("err = %v, want ErrRunning naming engine engine-a and until when its heartbeat lasts", err)
	}
	t.Logf("refusal: %v", err)
	if got := w.pending(t); len(got) != 0 || w.streamMsgs(t) != 30 {
		t.Fatalf("a refused run moved work: pending %v, %d messages in the stream", got, w.streamMsgs(t))
	}

	// Once it expired, handback works at once, long before anything the
	// consumer holds could clear (it never does by waiting).
	var rep handback.Report
	for {
		rep, err = handback.Run(ctx, w.rdb, w.js, handback.Config{Queue: w.qc})
		if !errors.Is(err, handback.ErrRunning) {
			break
		}
		if time.Since(killed) > ttl+5*time.Second {
			t.Fatalf("handback still refuses %s after the kill (heartbeat TTL %s): %v", time.Since(killed).Round(time.Millisecond), ttl, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("handback ran %s after the kill: %+v", time.Since(killed).Round(time.Millisecond), rep)
	if got := w.pending(t); !slices.Equal(got, ids) {
		t.Errorf("dispatch:pending = %d ids, want all %d (in flight, released with a delay, queued): missing %v", len(got), len(ids),
			slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(got, id) }))
	}
	if n := w.streamMsgs(t); n != 0 {
		t.Errorf("%d messages left in the stream", n)
	}
	if live, err := st.LiveReplicas(ctx); err != nil || len(live) != 0 {
		t.Errorf("live replicas after the kill: %v, %v", live, err)
	}
	if members, _ := w.rdb.SMembers(ctx, store.EnginesSet).Result(); len(members) != 0 {
		t.Errorf("%s still lists %v after its heartbeat expired", store.EnginesSet, members)
	}

	// jetrelay run takes over again from a clean consumer: nothing to
	// deliver, nothing pending from before.
	cons, err = queue.EnsureConsumer(ctx, w.js, w.qc)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("the re-created consumer has %d pending acks and %d waiting items, want none", info.NumAckPending, info.NumPending)
	}
}
