package ops_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

func TestStatus_CountsWaitingWorkInRedisAndJetStream(t *testing.T) {
	e := newOpsEnv(t)
	e.waitingStream(t)
	ctx := context.Background()
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	old := e.delivery(t, sub, proto.DeliveryPending, time.Now().Add(-10*time.Minute))
	e.redis.Client.LPush(ctx, store.PendingList, old, "del_b", "del_c")
	for range 2 {
		e.publish(t, e.qc.Subject, nil)
	}
	e.publish(t, e.qc.ScheduleSubject("del_s"), map[string]string{
		jetstream.ScheduleHeader:       "@at " + time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		jetstream.ScheduleTargetHeader: e.qc.Subject,
	})
	for _, d := range []string{"del_h1", "del_h2"} {
		e.publish(t, e.qc.HeldSubject("whsub_paused", d), nil)
	}
	if err := store.New(e.redis.Client).Quarantine(ctx, "del_q", "corrupt_record", []byte("{")); err != nil {
		t.Fatal(err)
	}

	rep, err := e.tool.Status(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := rep.JetStream
	if q == nil || q.Depth != 2 || q.Scheduled != 1 || q.Held != 2 || q.HeldBySubscription["whsub_paused"] != 2 || q.OldestWaitingAge == "" {
		t.Fatalf("jetstream side: %+v (unknown: %s)", q, rep.JetStreamUnknown)
	}
	if rep.Redis.Pending != 3 || rep.Redis.Quarantined != 1 || !strings.HasPrefix(rep.Redis.OldestPendingAge, "10m") {
		t.Fatalf("redis side: %+v", rep.Redis)
	}
}

func TestStatus_ShowsEachReplicasOpenBreakersAndSaysWhichReplicasAreUnreachable(t *testing.T) {
	e := newOpsEnv(t)
	recv := receiver.New()
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	sub := e.subscription(t, "acme", srv.URL+"/down")
	recv.Handle("/down", "", receiver.Always(503))
	eng, br := e.runPipeline(t, func(c *engine.Config) {
		c.Breaker = engine.BreakerConfig{Threshold: 1, OpenFor: time.Hour, MaxOpenFor: time.Hour}
	})
	if _, _, err := e.admin.Emit(context.Background(), admin.Event{EventType: "budget.exhausted", TenantID: "acme"}, admin.TraceSnapshot{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the breaker to open", func() bool { return len(eng.OpenBreakers()) == 1 })

	mgmt := httptest.NewServer(ops.StatusHandler(e.tool, ops.LocalReplica("replica-a", "all", eng, br)))
	t.Cleanup(mgmt.Close)
	dead := httptest.NewServer(nil)
	dead.Close()

	env := map[string]string{"JETRELAY_MANAGEMENT_URLS": mgmt.URL + "," + dead.URL}
	out, stderr, err := e.cli(t, env, "status")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"replica replica-a", "1 open", "breaker " + sub, "open until", "replica " + dead.URL, "unknown: unreachable", "bridges", "ops-test alive"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, _, err = e.cli(t, env, "status", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep ops.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Replicas) != 2 {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	// The management port serves the same report for this replica.
	resp, err := mgmt.Client().Get(mgmt.URL + ops.StatusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var served ops.Report
	if err := json.NewDecoder(resp.Body).Decode(&served); err != nil || len(served.Replicas) != 1 || len(served.Replicas[0].OpenBreakers) != 1 {
		t.Fatalf("/status: %+v %v", served, err)
	}
}

func TestInspectAndStatus_FollowARetryTheEngineScheduled(t *testing.T) {
	e := newOpsEnv(t)
	recv := receiver.New()
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	_, _, err := e.admin.CreateSubscription(ctx, admin.Subscription{
		TenantID: "acme", URL: srv.URL + "/flaky", EventTypes: []string{"budget.exhausted"}, CreatedAt: time.Now().Add(-time.Hour),
		// A first retry a minute out: long enough to be seen waiting.
		RetryPolicy: &proto.RetryPolicy{InitialDelayMs: ptr(int64(60000))},
	})
	if err != nil {
		t.Fatal(err)
	}
	recv.Handle("/flaky", "", receiver.Always(503))
	e.runPipeline(t)
	_, ids, err := e.admin.Emit(ctx, admin.Event{EventType: "budget.exhausted", TenantID: "acme"}, admin.TraceSnapshot{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("emit: %v %v", ids, err)
	}
	var in *ops.Inspection
	eventually(t, time.Minute, "the retry to be scheduled", func() bool {
		in, err = e.tool.Inspect(ctx, ids[0], nil)
		return err == nil && in.Where.State == "scheduled"
	})
	at, err := proto.ParseInstant(in.Where.ScheduledFor)
	if err != nil || time.Until(at) < 30*time.Second || time.Until(at) > 2*time.Minute {
		t.Fatalf("scheduled for %q (%v); want about a minute from now", in.Where.ScheduledFor, err)
	}
	if in.LastAnswer == "" || !strings.Contains(in.Next, "attempts it again at") {
		t.Fatalf("last answer %q, next %q", in.LastAnswer, in.Next)
	}
	rep, err := e.tool.Status(ctx, nil)
	if err != nil || rep.JetStream == nil || rep.JetStream.Scheduled != 1 {
		t.Fatalf("status: %+v %v", rep, err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestInspectAndStatus_ShowADeliveryTheEngineHeldForAPausedSubscription(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	sub := e.subscription(t, "acme", "https://hooks.example.com/paused")
	if err := e.admin.SetStatus(ctx, sub, proto.SubscriptionPaused); err != nil {
		t.Fatal(err)
	}
	e.runPipeline(t)
	ev, err := e.admin.SaveEvent(ctx, admin.Event{EventType: "budget.exhausted", TenantID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	// cycles-server's runtime enqueues without looking at the status.
	id, err := e.admin.EnqueueRuntimeStyle(ctx, admin.Delivery{SubscriptionID: sub, EventID: ev, EventType: "budget.exhausted"})
	if err != nil {
		t.Fatal(err)
	}
	var in *ops.Inspection
	eventually(t, time.Minute, "the delivery to be held", func() bool {
		in, err = e.tool.Inspect(ctx, id, nil)
		return err == nil && in.Where.State == "held"
	})
	if !strings.Contains(in.Where.Detail, "PAUSED") || !strings.Contains(in.Next, "set-status "+sub+" ACTIVE") {
		t.Fatalf("held without why or what to do: %+v next %q", in.Where, in.Next)
	}
	rep, err := e.tool.Status(ctx, nil)
	if err != nil || rep.JetStream == nil || rep.JetStream.HeldBySubscription[sub] != 1 {
		t.Fatalf("status: %+v %v", rep.JetStream, err)
	}
}

func TestStatus_ListsTheEnginesWhoseHeartbeatIsAlive(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	st := store.New(e.redis.Client)
	if err := st.BeatEngine(ctx, "engine-a", "pid=1 host=node-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	// One that was killed: its heartbeat is gone, its registry entry not yet.
	if err := e.redis.Client.SAdd(ctx, store.EnginesSet, "engine-dead").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := e.tool.Status(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Engines) != 1 || rep.Engines[0].ID != "engine-a" || !strings.Contains(rep.Engines[0].Heartbeat, "node-1") {
		t.Fatalf("engines = %+v, want engine-a alone", rep.Engines)
	}
	out, _, err := e.cli(t, nil, "status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "engine-a alive") || strings.Contains(out, "engine-dead") {
		t.Fatalf("status does not list the live engine alone:\n%s", out)
	}
}

func TestStatus_ShowsAnOrderedLineTheReplicaCannotPull(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	recv := receiver.New()
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	sub := e.subscription(t, "acme", srv.URL+"/ordered")
	recv.Handle("/ordered", "", receiver.Healthy())
	if err := store.New(e.redis.Client).SetOrdering(ctx, sub, proto.OrderingStrict); err != nil {
		t.Fatal(err)
	}
	eng, br := e.runPipeline(t, func(c *engine.Config) { c.LineFailingAfter = time.Second })
	eventually(t, 10*time.Second, "the engine to be ready", func() bool { return eng.Ready(ctx) == nil })
	// The stream allows no further consumer: the line's cannot be created.
	stream, err := e.js.Stream(ctx, e.qc.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	cfg.MaxConsumers = info.State.Consumers
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.admin.Emit(ctx, admin.Event{EventType: "budget.exhausted", TenantID: "acme"}, admin.TraceSnapshot{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the line to be reported failing", func() bool { return eng.Ready(ctx) != nil })

	mgmt := httptest.NewServer(ops.StatusHandler(e.tool, ops.LocalReplica("replica-a", "all", eng, br)))
	t.Cleanup(mgmt.Close)
	out, stderr, err := e.cli(t, map[string]string{"JETRELAY_MANAGEMENT_URLS": mgmt.URL}, "status")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(out, "NOT READY: ordered line "+sub) || !strings.Contains(out, "maximum consumers") {
		t.Errorf("status does not name the ordered line of %s that cannot be pulled:\n%s", sub, out)
	}
}
