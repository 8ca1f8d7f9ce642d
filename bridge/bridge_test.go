package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

const (
	pending    = "dispatch:pending"
	processing = "dispatch:processing:test-bridge"
)

func TestRun_MovesEveryPendingIDIntoTheStreamExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := ids("dlv_", 5000)
	e.lpush(t, pending, want)

	b := e.newBridge(t, bridge.Config{})
	r := start(t, b)
	eventually(t, 20*time.Second, "5000 msgs in the stream", func() bool { return e.streamMsgs(t) == 5000 })
	r.stop(t)

	e.assertExactlyOnce(t, want)
	if n := e.llen(t, pending); n != 0 {
		t.Errorf("dispatch:pending still holds %d ids", n)
	}
	if n := e.llen(t, processing); n != 0 {
		t.Errorf("processing list still holds %d ids", n)
	}
	if s := b.Stats(); s.Moved != 5000 || s.Published != 5000 || s.Duplicates != 0 {
		t.Errorf("stats = %+v, want 5000 moved and published", s)
	}
}

func TestRun_TwoBridgesShareTheWorkWithoutDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := ids("dlv_", 2000)
	b1 := e.newBridge(t, bridge.Config{InstanceID: "one", BatchSize: 16})
	b2 := e.newBridge(t, bridge.Config{InstanceID: "two", BatchSize: 16})
	start(t, b1)
	start(t, b2)
	e.lpush(t, pending, want)

	eventually(t, 20*time.Second, "2000 msgs in the stream", func() bool { return e.streamMsgs(t) == 2000 })
	e.assertExactlyOnce(t, want)
	if s1, s2 := b1.Stats(), b2.Stats(); s1.Moved+s2.Moved != 2000 {
		t.Errorf("moved %d + %d, want 2000 in total", s1.Moved, s2.Moved)
	}
}

func TestRun_RepublishesIDsAKilledBridgeLeftBetweenMoveAndPublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	published := ids("dlv_pub_", 5)   // published, killed before LREM
	unpublished := ids("dlv_new_", 5) // killed right after the move
	e.publishDirect(t, published)
	e.lpush(t, processing, append(slices.Clone(published), unpublished...))

	b := e.newBridge(t, bridge.Config{})
	start(t, b)
	eventually(t, 10*time.Second, "processing list recovered", func() bool { return e.llen(t, processing) == 0 })

	e.assertExactlyOnce(t, append(published, unpublished...))
	if s := b.Stats(); s.Recovered != 10 || s.Duplicates != 5 || s.Published != 5 {
		t.Errorf("stats = %+v, want 10 recovered of which 5 duplicates", s)
	}
}

func TestRun_AdoptsTheListOfADeadInstanceButNotOfALiveOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	dead := ids("dlv_dead_", 3)
	alive := ids("dlv_alive_", 3)
	legacy := ids("dlv_legacy_", 2)
	e.lpush(t, "dispatch:processing:dead", dead)
	e.lpush(t, "dispatch:processing:alive", alive)
	e.rdb.Set(ctx, "jetrelay:bridge:alive", "x", time.Minute)
	// Both ran once, so both are in the registry of bridges.
	e.rdb.SAdd(ctx, "jetrelay:bridges", "dead", "alive")
	// The reference service's companions of its own list: not lists, never touched.
	e.rdb.ZAdd(ctx, "dispatch:processing:claimed_at", redis.Z{Score: 1, Member: "dlv_legacy_00000"})
	e.rdb.HSet(ctx, "dispatch:processing:claim_owner", "dlv_legacy_00000", "tok")
	e.lpush(t, "dispatch:processing", legacy)

	b := e.newBridge(t, bridge.Config{})
	start(t, b)
	eventually(t, 10*time.Second, "dead instance's ids in the stream", func() bool { return e.streamMsgs(t) == 3 })

	e.assertExactlyOnce(t, dead)
	if n := e.llen(t, "dispatch:processing:dead"); n != 0 {
		t.Errorf("dead instance's list still holds %d ids", n)
	}
	if got := e.lrange(t, "dispatch:processing:alive"); len(got) != 3 {
		t.Errorf("live instance's list = %v, want it untouched", got)
	}
	if got := e.lrange(t, "dispatch:processing"); len(got) != 2 {
		t.Errorf("legacy list = %v, want it untouched without AdoptLegacyProcessing", got)
	}
	if s := b.Stats(); s.Adopted != 3 {
		t.Errorf("stats = %+v, want 3 adopted", s)
	}
	// The dead instance, now empty, leaves the registry; the live one stays.
	eventually(t, 10*time.Second, "the dead bridge to leave the registry", func() bool {
		ok, _ := e.rdb.SIsMember(ctx, "jetrelay:bridges", "dead").Result()
		return !ok
	})
	if ok, _ := e.rdb.SIsMember(ctx, "jetrelay:bridges", "alive").Result(); !ok {
		t.Error("a live bridge was dropped from the registry")
	}
}

func TestRun_AdoptsALiveInstancesListOnceItsHeartbeatExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	dead := ids("dlv_dead_", 2)
	later := ids("dlv_later_", 4)
	e.lpush(t, "dispatch:processing:dead", dead)
	e.lpush(t, "dispatch:processing:other", later)
	e.rdb.Set(ctx, "jetrelay:bridge:other", "x", 2*time.Second)
	e.rdb.SAdd(ctx, "jetrelay:bridges", "dead", "other")

	b := e.newBridge(t, bridge.Config{HeartbeatTTL: time.Second})
	start(t, b)
	// The dead list's ids arriving proves the first scan has run.
	eventually(t, 10*time.Second, "dead instance's ids in the stream", func() bool { return e.streamMsgs(t) == 2 })
	if got := e.lrange(t, "dispatch:processing:other"); len(got) != 4 {
		t.Fatalf("list adopted while its heartbeat was alive: %v", got)
	}
	eventually(t, 10*time.Second, "ids adopted after the heartbeat expired", func() bool { return e.streamMsgs(t) == 6 })
	e.assertExactlyOnce(t, append(dead, later...))
}

func TestRun_AdoptsTheReferenceServicesIdleClaimsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	stale, fresh, unclaimed := ids("dlv_stale_", 2), ids("dlv_fresh_", 1), ids("dlv_unclaimed_", 1)
	e.lpush(t, "dispatch:processing", append(append(append([]string{}, stale...), fresh...), unclaimed...))
	// As a reference replica (0.1.25.24) claims them: stale ones ten minutes
	// ago (a crashed replica), the fresh one just now (a live one sending it).
	for _, id := range stale {
		e.rdb.ZAdd(ctx, "dispatch:processing:claimed_at", redis.Z{Score: float64(time.Now().Add(-10 * time.Minute).UnixMilli()), Member: id})
		e.rdb.HSet(ctx, "dispatch:processing:claim_owner", id, "token-of-a-dead-replica")
	}
	e.rdb.ZAdd(ctx, "dispatch:processing:claimed_at", redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: fresh[0]})
	e.rdb.HSet(ctx, "dispatch:processing:claim_owner", fresh[0], "token-of-a-live-replica")

	b := e.newBridge(t, bridge.Config{AdoptLegacyProcessing: true, LegacyProcessingIdle: 2 * time.Second, HeartbeatTTL: time.Second})
	start(t, b)
	eventually(t, 10*time.Second, "the stale claims in the stream", func() bool { return e.streamMsgs(t) >= 2 })
	// An entry without a claim is stamped when first seen and adopted once idle.
	eventually(t, 15*time.Second, "the unclaimed entry adopted after the idle period", func() bool { return e.streamMsgs(t) == 3 })
	e.assertExactlyOnce(t, append(stale, unclaimed...))
	if got := e.lrange(t, "dispatch:processing"); len(got) != 1 || got[0] != fresh[0] {
		t.Errorf("reference list = %v, want only the live replica's claim left", got)
	}
	if owner, _ := e.rdb.HGet(ctx, "dispatch:processing:claim_owner", fresh[0]).Result(); owner != "token-of-a-live-replica" {
		t.Errorf("the live claim's owner was changed to %q", owner)
	}
	if n, _ := e.rdb.ZCard(ctx, "dispatch:processing:claimed_at").Result(); n != 1 {
		t.Errorf("claimed_at keeps %d entries, want only the live claim", n)
	}
}

func TestRun_KeepsIDsWhileTheStreamIsFullAndDeliversThemOnceThereIsRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	want := ids("dlv_", 20)
	e.lpush(t, pending, want)

	qcfg := queue.Config{MaxMsgs: 5}
	b := e.newBridge(t, bridge.Config{Queue: qcfg})
	start(t, b)
	eventually(t, 10*time.Second, "stream full", func() bool { return e.streamMsgs(t) == 5 })
	eventually(t, 10*time.Second, "Ready to report the full stream", func() bool {
		err := b.Ready(ctx)
		return err != nil && strings.Contains(err.Error(), "maximum messages")
	})
	if kept := e.llens(t, processing, pending); kept != 15 {
		t.Fatalf("Redis keeps %d ids while the stream is full, want 15", kept)
	}

	cons, err := queue.EnsureConsumer(ctx, e.js, qcfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	deadline := time.Now().Add(20 * time.Second)
	for len(seen) < len(want) && time.Now().Before(deadline) {
		batch, err := cons.Fetch(5, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			id, err := queue.DeliveryID(m)
			if err != nil {
				t.Fatal(err)
			}
			seen[id]++
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("id %s consumed %d times, want once", id, seen[id])
		}
	}
	eventually(t, 5*time.Second, "Ready again", func() bool { return b.Ready(ctx) == nil })
	if n := e.llen(t, processing); n != 0 {
		t.Errorf("processing list still holds %d ids", n)
	}
}

func TestRun_PromotesDueLegacyRetriesAndLeavesFutureOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	now := time.Now()
	due := ids("dlv_due_", 150) // more than one 100-id promotion batch
	future := ids("dlv_future_", 3)
	for _, id := range due {
		e.rdb.ZAdd(ctx, "dispatch:retry", redis.Z{Score: float64(now.Add(-time.Minute).UnixMilli()), Member: id})
	}
	for _, id := range future {
		e.rdb.ZAdd(ctx, "dispatch:retry", redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: id})
	}

	b := e.newBridge(t, bridge.Config{})
	start(t, b)
	eventually(t, 10*time.Second, "due ids in the stream", func() bool { return e.streamMsgs(t) == 150 })

	e.assertExactlyOnce(t, due)
	left, err := e.rdb.ZRange(ctx, "dispatch:retry", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	if !slices.Equal(left, future) {
		t.Errorf("dispatch:retry = %v, want only the future ids %v", left, future)
	}
	if s := b.Stats(); s.Promoted != 150 {
		t.Errorf("stats = %+v, want 150 promoted", s)
	}
}

func TestRun_QuarantinesMalformedIDsAndKeepsGoodOnesFlowing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := ids("dlv_good_", 3)
	bad := []string{"", "has space", "trailing\n", "ctl\x01x", strings.Repeat("x", queue.MaxDeliveryIDLen+1)}
	e.lpush(t, pending, append(slices.Clone(bad), good...))

	b := e.newBridge(t, bridge.Config{})
	start(t, b)
	eventually(t, 10*time.Second, "malformed ids quarantined", func() bool { return e.llen(t, "dispatch:failed") == int64(len(bad)) })
	eventually(t, 10*time.Second, "good ids in the stream", func() bool { return e.streamMsgs(t) == 3 })

	e.assertExactlyOnce(t, good)
	var quarantined []string
	for _, raw := range e.lrange(t, "dispatch:failed") {
		var entry struct {
			DeliveryID      string `json:"delivery_id"`
			Reason          string `json:"reason"`
			QuarantinedAtMs int64  `json:"quarantined_at_ms"`
			Payload         string `json:"payload"`
		}
		if err := json.Unmarshal([]byte(raw), &entry); err != nil {
			t.Fatalf("dispatch:failed entry %q: %v", raw, err)
		}
		if entry.Reason != "malformed_id" || entry.QuarantinedAtMs == 0 || !strings.HasPrefix(entry.Payload, entry.DeliveryID) {
			t.Errorf("entry = %+v", entry)
		}
		quarantined = append(quarantined, entry.Payload)
	}
	slices.Sort(quarantined)
	slices.Sort(bad)
	if !slices.Equal(quarantined, bad) {
		t.Errorf("quarantined payloads = %q, want %q", quarantined, bad)
	}
	eventually(t, 5*time.Second, "processing list empty", func() bool { return e.llen(t, processing) == 0 })
	if s := b.Stats(); s.Quarantined != uint64(len(bad)) {
		t.Errorf("stats = %+v, want %d quarantined", s, len(bad))
	}
}

func TestRun_ReturnsPromptlyOnCancelAndTheNextRunRecoversWhatWasInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := ids("dlv_", 10)
	e.lpush(t, pending, want)

	// A full stream keeps 8 ids stuck in the processing list, retried with backoff.
	first := e.newBridge(t, bridge.Config{Queue: queue.Config{MaxMsgs: 2}})
	r := start(t, first)
	eventually(t, 10*time.Second, "stream full", func() bool { return e.streamMsgs(t) == 2 })
	eventually(t, 10*time.Second, "ids moved", func() bool { return e.llen(t, processing) == 8 })
	if took := r.stop(t); took > 3*time.Second {
		t.Errorf("Run took %s to return after cancel", took)
	}
	if n := e.llen(t, processing); n != 8 {
		t.Fatalf("processing list holds %d ids after shutdown, want the 8 unpublished ones", n)
	}

	// Restarted with an unbounded stream (EnsureStream lifts the limit).
	second := e.newBridge(t, bridge.Config{})
	start(t, second)
	eventually(t, 10*time.Second, "all ids in the stream", func() bool { return e.streamMsgs(t) == 10 })
	e.assertExactlyOnce(t, want)
	if s := second.Stats(); s.Recovered != 8 {
		t.Errorf("stats = %+v, want 8 recovered", s)
	}
}

func TestRun_ReturnsPromptlyWhenIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBridge(t, bridge.Config{})
	r := start(t, b)
	eventually(t, 10*time.Second, "bridge ready", func() bool { return b.Ready(context.Background()) == nil })
	if took := r.stop(t); took > 3*time.Second {
		t.Errorf("Run took %s to return after cancel", took)
	}
	if n, _ := e.rdb.Exists(context.Background(), "jetrelay:bridge:test-bridge").Result(); n != 0 {
		t.Error("heartbeat key left behind after a clean shutdown")
	}
}

func TestRun_SurvivesARedisRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	b := e.newBridge(t, bridge.Config{})
	start(t, b)
	e.lpush(t, pending, []string{"dlv_before"})
	eventually(t, 10*time.Second, "first id in the stream", func() bool { return e.streamMsgs(t) == 1 })

	if err := e.redis.Server.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "Ready to report Redis down", func() bool {
		err := b.Ready(ctx)
		return err != nil && strings.Contains(err.Error(), "redis")
	})
	if err := e.redis.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "Redis answering", func() bool { return e.rdb.Ping(ctx).Err() == nil })
	e.lpush(t, pending, []string{"dlv_after"})
	eventually(t, 15*time.Second, "second id in the stream", func() bool { return e.streamMsgs(t) == 2 })
	e.assertExactlyOnce(t, []string{"dlv_before", "dlv_after"})
	eventually(t, 10*time.Second, "Ready again", func() bool { return b.Ready(ctx) == nil })
}

func TestRun_RecreatesADeletedStreamAndKeepsPublishing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	b := e.newBridge(t, bridge.Config{})
	start(t, b)
	eventually(t, 10*time.Second, "bridge ready", func() bool { return b.Ready(ctx) == nil })
	if err := e.js.DeleteStream(ctx, queue.DefaultStream); err != nil {
		t.Fatal(err)
	}
	e.lpush(t, pending, []string{"dlv_after_delete"})
	eventually(t, 10*time.Second, "id in the recreated stream", func() bool { return e.streamMsgs(t) == 1 })
	e.assertExactlyOnce(t, []string{"dlv_after_delete"})
}

func TestRun_RefusesASecondConcurrentRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.newBridge(t, bridge.Config{})
	start(t, b)
	eventually(t, 10*time.Second, "bridge ready", func() bool { return b.Ready(context.Background()) == nil })
	if err := b.Run(context.Background()); err != bridge.ErrAlreadyRunning {
		t.Errorf("second Run = %v, want ErrAlreadyRunning", err)
	}
}

func TestNew_RejectsUnusableConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name string
		cfg  bridge.Config
		want string
	}{
		{"reserved instance id", bridge.Config{InstanceID: "claimed_at"}, "reserved"},
		{"instance id with space", bridge.Config{InstanceID: "a b"}, "whitespace"},
		{"sub-second block timeout", bridge.Config{InstanceID: "x", BlockTimeout: 200 * time.Millisecond}, "block timeout"},
		{"negative batch", bridge.Config{InstanceID: "x", BatchSize: -1}, "batch size"},
		{"wildcard subject", bridge.Config{InstanceID: "x", Queue: queue.Config{Subject: "a.*"}}, "literal subject"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bridge.New(e.rdb, e.js, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestRun_KeepsIDsWhileNATSIsDownAndPublishesThemWhenItReturns(t *testing.T) {
	t.Parallel()
	r := testenv.Redis(t)
	dir := t.TempDir()
	ctx := testCtx(t)
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(srv.ClientURL(), "nats://")
	t.Cleanup(func() { srv.Shutdown() })
	nc, err := srv.Connect(nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{redis: r, rdb: r.Client, js: js}

	b := e.newBridge(t, bridge.Config{PublishTimeout: time.Second})
	start(t, b)
	eventually(t, 10*time.Second, "bridge ready", func() bool { return b.Ready(ctx) == nil })
	// Ready answers once the stream exists, which may be before the
	// bridge's loop is past its own start-up (ensuring the stream, which
	// it retries while NATS is down, moving nothing meanwhile). One id
	// published shows that it is moving.
	warm := "dlv_warm"
	e.lpush(t, pending, []string{warm})
	eventually(t, 10*time.Second, "a first id published", func() bool { return b.Stats().Published == 1 })

	srv.Shutdown()
	want := ids("dlv_", 50)
	e.lpush(t, pending, want)
	eventually(t, 10*time.Second, "an id moved while NATS is down", func() bool { return e.llen(t, processing) > 0 })
	eventually(t, 10*time.Second, "Ready to report JetStream down", func() bool {
		err := b.Ready(ctx)
		return err != nil && strings.Contains(err.Error(), "jetstream")
	})

	if kept := e.llens(t, processing, pending); kept != 50 {
		t.Fatalf("Redis keeps %d ids while NATS is down, want all 50", kept)
	}

	srv, err = natsserver.Start(ctx, natsserver.Options{StoreDir: dir, Listen: addr})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "ids published after NATS returned", func() bool {
		return e.llens(t, processing, pending) == 0
	})
	// The test's own connection reconnects on its own schedule: read the
	// stream once it answers again.
	eventually(t, 20*time.Second, "the stream to answer with every id", func() bool { return e.streamMsgs(t) >= 51 })
	e.assertExactlyOnce(t, append([]string{warm}, want...))
}

func TestRun_KeepsAKeeperInTheStreamBehindWhatItPublishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	qc := queue.Config{}.WithDefaults()
	ttl := time.Second // adoption scans every third of it
	start(t, e.newBridge(t, bridge.Config{InstanceID: "one", HeartbeatTTL: ttl}))
	start(t, e.newBridge(t, bridge.Config{InstanceID: "two", HeartbeatTTL: ttl}))
	gone := start(t, e.newBridge(t, bridge.Config{InstanceID: "gone", HeartbeatTTL: ttl}))
	st, err := queue.EnsureStream(ctx, e.js, qc)
	if err != nil {
		t.Fatal(err)
	}
	// keepers is each bridge's keepers, and whether one of them sits
	// behind the last work item.
	keepers := func() (map[string]uint64, bool) {
		t.Helper()
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(qc.KeeperSubjects()))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]uint64{}
		for _, b := range []string{"one", "two", "gone"} {
			got[b] = info.State.Subjects[qc.KeeperSubject(b)]
		}
		w, err := st.GetLastMsgForSubject(ctx, qc.Subject)
		if err != nil {
			return got, false
		}
		_, err = st.GetMsg(ctx, w.Sequence+1, jetstream.WithGetMsgSubject(qc.KeeperSubjects()))
		return got, err == nil
	}
	eventually(t, 10*time.Second, "each bridge's keeper", func() bool {
		got, _ := keepers()
		return got["one"] == 1 && got["two"] == 1 && got["gone"] == 1
	})
	// A bridge that stopped for good is forgotten by the others, and its
	// keeper removed.
	gone.stop(t)
	eventually(t, 10*time.Second, "the stopped bridge's keeper removed", func() bool {
		got, _ := keepers()
		return got["gone"] == 0
	})
	for round := range 3 {
		e.lpush(t, pending, ids(fmt.Sprintf("dlv_%d_", round), 100))
		want := uint64(100 * (round + 1))
		eventually(t, 10*time.Second, "the round's work items in the stream", func() bool { return e.streamMsgs(t) == want })
		// A renewal follows the bridges' publishes, so a keeper sits
		// behind them, in the stream's newest block; each running bridge
		// keeps one.
		eventually(t, 10*time.Second, "a keeper stored after the work items", func() bool {
			got, behind := keepers()
			return behind && got["one"] == 1 && got["two"] == 1
		})
	}
}

func TestRun_RenewsTheKeeperOnceAfterABacklogNotWhileMovingIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	qc := queue.Config{}.WithDefaults()
	// Every renewal is a publish on the bridge's keeper subject.
	renewals, err := e.nc.SubscribeSync(qc.KeeperSubjects())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// A backlog the bridge moves in full batches for well over a renewal
	// period (keepEvery, 250 ms).
	backlog := ids("dlv_", 10000)
	e.lpush(t, pending, backlog)
	start(t, e.newBridge(t, bridge.Config{BatchSize: 2}))
	eventually(t, 60*time.Second, "the backlog in the stream", func() bool { return e.streamMsgs(t) == uint64(len(backlog)) })
	eventually(t, 10*time.Second, "a keeper stored", func() bool {
		n, _, err := renewals.Pending()
		return err == nil && n > 0
	})
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := renewals.Pending(); err != nil || n != 1 {
		t.Errorf("%d keepers published (%v) for a backlog moved in full batches, want 1: the one after it", n, err)
	}
}

// scriptRemovals counts the round trips a client spends on removing ids
// from list on their own: a script call whose only key is the list, sent
// alone rather than in the pipeline of a move.
type scriptRemovals struct {
	list  string
	alone atomic.Int64
}

func (h *scriptRemovals) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptRemovals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 3 && (a[0] == "evalsha" || a[0] == "eval") && fmt.Sprint(a[2]) == "1" && a[3] == h.list {
			h.alone.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *scriptRemovals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// At a rate where every id finds the bridge waiting, each published id
// leaves the processing list in the round trip of the next wait, not in
// one of its own, and still at once: the list is empty while the bridge
// waits, and after it stops.
func TestRun_RemovesWhatItPublishedInTheRoundTripOfTheNextMove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hook := &scriptRemovals{list: processing}
	rdb := redis.NewClient(&redis.Options{Addr: e.rdb.Options().Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(hook)
	b, err := bridge.New(rdb, e.js, bridge.Config{InstanceID: "test-bridge"})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, b)
	eventually(t, 10*time.Second, "bridge ready", func() bool { return b.Ready(context.Background()) == nil })
	want := ids("dlv_", 10)
	for i, id := range want {
		e.lpush(t, pending, []string{id})
		eventually(t, 10*time.Second, "the id in the stream", func() bool { return e.streamMsgs(t) == uint64(i+1) })
		eventually(t, 10*time.Second, "the processing list empty while the bridge waits", func() bool { return e.llen(t, processing) == 0 })
		if i == 0 {
			// The first removal loads its script (the server's cache was
			// empty): that one call may be on its own.
			hook.alone.Store(0)
		}
	}
	if n := hook.alone.Load(); n != 0 {
		t.Errorf("%d removals took a round trip of their own, want none for %d ids published one at a time", n, len(want)-1)
	}
	e.lpush(t, pending, []string{"dlv_last"})
	eventually(t, 10*time.Second, "the last id in the stream", func() bool { return e.streamMsgs(t) == uint64(len(want)+1) })
	r.stop(t)
	if n := e.llen(t, processing); n != 0 {
		t.Errorf("processing list holds %d ids after a clean stop, want none: every one was published", n)
	}
	e.assertExactlyOnce(t, append(want, "dlv_last"))
}
