package handback_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/handback"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// world is Redis and JetStream as a stopped jetrelay leaves them.
type world struct {
	rdb *redis.Client
	js  jetstream.JetStream
	qc  queue.Config
	s   jetstream.Stream
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{rdb: testenv.Redis(t).Client, qc: queue.Config{}.WithDefaults()}
	_, _, w.js = testenv.NATS(t)
	var err error
	if w.s, err = queue.EnsureStream(context.Background(), w.js, w.qc); err != nil {
		t.Fatal(err)
	}
	if _, err := w.js.CreateOrUpdateConsumer(context.Background(), w.qc.Stream, queue.ConsumerConfig(w.qc)); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) publish(t *testing.T, m *nats.Msg) {
	t.Helper()
	if _, err := w.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func (w *world) pending(t *testing.T) []string {
	t.Helper()
	ids, err := w.rdb.LRange(context.Background(), store.PendingList, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

func (w *world) retry(t *testing.T) map[string]int64 {
	t.Helper()
	zs, err := w.rdb.ZRangeWithScores(context.Background(), store.RetryZSet, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, z := range zs {
		out[z.Member.(string)] = int64(z.Score)
	}
	return out
}

func (w *world) streamMsgs(t *testing.T) uint64 {
	t.Helper()
	info, err := w.s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestRun_HandsEveryHeldDeliveryBackWhereTheReferenceReadsItAndLosesNothing(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	parkedDue := time.Now().Add(2 * time.Hour).UnixMilli()

	w.publish(t, queue.NewMsg(w.qc.Subject, "del_queued00000001"))
	w.publish(t, queue.NewMsg(w.qc.Subject, "del_queued00000002"))
	w.publish(t, queue.NewScheduleMsg(w.qc, "del_retrying000001", due))
	// A put-off (open breaker) of a delivery not yet tried: due now for the reference.
	w.publish(t, queue.NewScheduleMsg(w.qc, "del_putoff00000001", due))
	for _, id := range []string{"del_retrying000001", "del_parked00000001"} {
		w.rdb.Set(ctx, store.DeliveryKey(id), `{"delivery_id":"`+id+`","subscription_id":"whsub_1","event_id":"evt_1","status":"RETRYING","attempted_at":"2026-01-01T00:00:00Z","attempts":1}`, time.Hour)
	}
	w.publish(t, queue.NewHeldMsg(w.qc, "whsub_paused000001", "del_held0000000001", time.Now().Add(time.Hour)))
	w.publish(t, queue.NewHeldCheckMsg(w.qc, "whsub_paused000001", time.Now().Add(time.Minute)))
	// The keeper a bridge keeps in the stream: not work, removed, and not
	// counted as left behind.
	if err := queue.Keep(ctx, w.js, w.qc, "bridge-1"); err != nil {
		t.Fatal(err)
	}
	// A bridge stopped between its move out of dispatch:pending and the
	// PubAck: one id only in its list, one also in the stream.
	w.rdb.SAdd(ctx, bridge.RegistryKey, "bridge-1")
	w.rdb.LPush(ctx, bridge.ProcessingKey("bridge-1"), "del_inflight000001", "del_queued00000002")
	w.rdb.ZAdd(ctx, "jetrelay:deferred", redis.Z{Score: float64(parkedDue), Member: "del_parked00000001"})
	// A never-sent delivery a bridge left in Redis under its subscription's
	// intake hold: due now for the reference.
	w.rdb.ZAdd(ctx, store.ParkedZSet("whsub_dead00000001"), redis.Z{Score: float64(parkedDue), Member: "del_intake00000001"})
	w.rdb.SAdd(ctx, store.ParkedSubscriptions, "whsub_dead00000001")
	w.rdb.HSet(ctx, store.IntakeHolds, "whsub_dead00000001", `{"reason":"breaker_open"}`)
	// A previous run wrote this id and crashed before removing its message.
	w.rdb.LPush(ctx, store.PendingList, "del_queued00000001")

	rep, err := handback.Run(ctx, w.rdb, w.js, handback.Config{Queue: w.qc})
	if err != nil {
		t.Fatal(err)
	}
	wantPending := []string{"del_held0000000001", "del_inflight000001", "del_intake00000001", "del_putoff00000001", "del_queued00000001", "del_queued00000002"}
	if got := w.pending(t); !slices.Equal(got, wantPending) {
		t.Errorf("dispatch:pending = %v, want each queued, held, put-off and in-flight id once: %v", got, wantPending)
	}
	wantRetry := map[string]int64{"del_retrying000001": due.UnixMilli(), "del_parked00000001": parkedDue}
	if got := w.retry(t); len(got) != 2 || got["del_retrying000001"] != wantRetry["del_retrying000001"] || got["del_parked00000001"] != parkedDue {
		t.Errorf("dispatch:retry = %v, want %v (scored with when each is due)", got, wantRetry)
	}
	if n := w.streamMsgs(t); n != 0 {
		t.Errorf("%d messages left in the stream", n)
	}
	if n, _ := w.rdb.Exists(ctx, bridge.ProcessingKey("bridge-1"), "jetrelay:deferred", store.ParkedZSet("whsub_dead00000001"), store.ParkedSubscriptions, store.IntakeHolds).Result(); n != 0 {
		t.Errorf("jetrelay's own Redis keys still hold ids")
	}
	if want := (handback.Report{Pending: 5, Retry: 2, Present: 2, Removed: 5, Checks: 1}); rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}

	// Running it again finds nothing and writes nothing.
	if rep, err := handback.Run(ctx, w.rdb, w.js, handback.Config{Queue: w.qc}); err != nil || rep != (handback.Report{}) {
		t.Errorf("second run: %+v, %v; want nothing to do", rep, err)
	}
	if got := w.pending(t); !slices.Equal(got, wantPending) {
		t.Errorf("second run changed dispatch:pending: %v", got)
	}
}

func TestRun_RefusesWhileJetrelayRunsAndChangesNothing(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.rdb.SAdd(ctx, bridge.RegistryKey, "bridge-1")
	w.rdb.LPush(ctx, bridge.ProcessingKey("bridge-1"), "del_inflight000001")
	w.rdb.Set(ctx, bridge.HeartbeatKey("bridge-1"), "1", time.Minute)
	if _, err := handback.Run(ctx, w.rdb, w.js, handback.Config{Queue: w.qc}); !errors.Is(err, handback.ErrRunning) || !strings.Contains(err.Error(), "bridge bridge-1") {
		t.Fatalf("err = %v, want ErrRunning naming the live bridge", err)
	}
	w.rdb.Del(ctx, bridge.HeartbeatKey("bridge-1"))

	// A running engine: its heartbeat is alive (internal/app keeps it).
	if err := store.New(w.rdb).BeatEngine(ctx, "node-1-77-a1b2c3", "pid=77 host=node-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := handback.Run(ctx, w.rdb, w.js, handback.Config{Queue: w.qc})
	if !errors.Is(err, handback.ErrRunning) || !strings.Contains(err.Error(), "engine node-1-77-a1b2c3 (pid=77 host=node-1; heartbeat lasts until") {
		t.Fatalf("err = %v, want ErrRunning naming the engine", err)
	}
	if _, err := w.js.Consumer(ctx, w.qc.Stream, w.qc.Consumer); err != nil {
		t.Errorf("a refused run touched the engine consumer: %v", err)
	}
	if got, _ := w.rdb.LRange(ctx, bridge.ProcessingKey("bridge-1"), 0, -1).Result(); len(got) != 1 || len(w.pending(t)) != 0 {
		t.Errorf("a refused run moved work: processing list %v, pending %v", got, w.pending(t))
	}
}
