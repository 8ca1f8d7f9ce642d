package ops_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

// runPipeline starts a real bridge and engine on the env's Redis and
// JetStream, stopped when the test ends. tune adjusts the engine's config.
func (e *opsEnv) runPipeline(t *testing.T, tune ...func(*engine.Config)) (*engine.Engine, *bridge.Bridge) {
	t.Helper()
	wh, err := webhook.New(webhook.Config{RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wh.Close)
	reg := transport.NewRegistry()
	reg.Register("http", wh)
	cfg := engine.Config{Queue: e.qc, Workers: 16, DrainTimeout: 5 * time.Second, Logger: testLogger(t)}
	for _, f := range tune {
		f(&cfg)
	}
	eng, err := engine.New(e.redis.Client, e.js, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	br, err := bridge.New(e.redis.Client, e.js, bridge.Config{Queue: e.qc, InstanceID: "ops-test", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = br.Run(ctx); done <- struct{}{} }()
	go func() { _ = eng.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return eng, br
}

func TestRequeue_ThousandFailedDeliveriesEachArriveOnceEvenWhenRunTwice(t *testing.T) {
	e := newOpsEnv(t)
	recv := receiver.New()
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	sub := e.subscription(t, "acme", srv.URL+"/hooks")
	secret, err := e.redis.Client.Get(context.Background(), store.SecretKey(sub)).Result()
	if err != nil {
		t.Fatal(err)
	}
	ep := recv.Handle("/hooks", secret, receiver.Healthy()) // verifies every signature
	const n = 1000
	start := time.Now().Add(-2 * time.Hour)
	want := map[string]bool{}
	for i := range n {
		want[e.failed(t, sub, start.Add(time.Duration(i)*time.Millisecond))] = true
	}
	e.runPipeline(t)

	for run := range 2 {
		_, stderr, err := e.cli(t, nil, "deliveries", "requeue", "--status", "FAILED", "--subscription", sub, "--json")
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, stderr)
		}
		// Plain progress lines (not a TTY): one per tenth on the first run.
		if run == 0 && !strings.Contains(stderr, "requeued 1000/1000") {
			t.Errorf("run %d: no progress report on stderr:\n%s", run, stderr)
		}
		if run == 0 {
			eventually(t, 2*time.Minute, "1000 deliveries at the receiver", func() bool { return ep.Stats().Unique == n })
		}
	}
	eventually(t, time.Minute, "every delivery SUCCESS", func() bool {
		page, err := e.tool.List(context.Background(), ops.Filter{SubscriptionID: sub, Statuses: ops.StatusSet{proto.DeliverySuccess: true}}, 0, 0)
		return err == nil && len(page.Rows) == n
	})
	st := ep.Stats()
	if st.Unique != n || st.Duplicates != 0 || st.Requests != n {
		t.Fatalf("receiver saw %+v, want %d requests of %d distinct events and no duplicates", st, n, n)
	}
	for _, d := range ep.Deliveries() {
		if _, err := e.redis.Client.Get(context.Background(), "event:"+d.EventID).Result(); err != nil {
			t.Fatalf("receiver got event %s that was never stored: %v", d.EventID, err)
		}
	}
	rec, err := store.New(e.redis.Client).Delivery(context.Background(), firstKey(want))
	if err != nil || rec.Attempts != 1 {
		t.Fatalf("a requeued delivery should have been sent in one attempt after the reset: %+v %v", rec, err)
	}
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

func TestRequeue_UnknownIDsAreRefusedAndNothingChanges(t *testing.T) {
	e := newOpsEnv(t)
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	id := e.failed(t, sub, time.Now().Add(-time.Hour))
	before, _ := e.redis.Client.Get(context.Background(), store.DeliveryKey(id)).Result()

	_, _, err := e.cli(t, nil, "deliveries", "requeue", id, "del_doesnotexist")
	if !errors.Is(err, ops.ErrUnknownDeliveries) || !strings.Contains(err.Error(), "del_doesnotexist") {
		t.Fatalf("err = %v, want unknown deliveries naming del_doesnotexist", err)
	}
	after, _ := e.redis.Client.Get(context.Background(), store.DeliveryKey(id)).Result()
	if before != after {
		t.Fatalf("the known delivery changed although the command failed:\n%s\n%s", before, after)
	}
	if n, _ := e.redis.Client.LLen(context.Background(), store.PendingList).Result(); n != 0 {
		t.Fatalf("dispatch:pending has %d ids; want none", n)
	}
}

func TestRequeue_DryRunAndNonFailedDeliveriesChangeNothing(t *testing.T) {
	e := newOpsEnv(t)
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	failed := e.failed(t, sub, time.Now().Add(-time.Hour))
	pending := e.delivery(t, sub, proto.DeliveryPending, time.Now().Add(-time.Minute))

	out, _, err := e.cli(t, nil, "deliveries", "requeue", "--dry-run", failed, pending)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "would requeue "+failed) || !strings.Contains(out, "skipped "+pending+": status is PENDING and whether it is still queued is unknown") {
		t.Fatalf("dry run output:\n%s", out)
	}
	rec, _ := store.New(e.redis.Client).Delivery(context.Background(), failed)
	if rec.Status != proto.DeliveryFailed {
		t.Fatalf("dry run changed the record to %s", rec.Status)
	}
	if n, _ := e.redis.Client.LLen(context.Background(), store.PendingList).Result(); n != 0 {
		t.Fatalf("dry run pushed %d ids", n)
	}
}

func TestRequeue_ResetsTheRecordAsANewDeliveryAndPushesItOnce(t *testing.T) {
	e := newOpsEnv(t)
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	id := e.failed(t, sub, time.Now().Add(-48*time.Hour))

	res, err := e.tool.Requeue(context.Background(), []string{id, id}, ops.RequeueOptions{})
	if err != nil || len(res.Requeued) != 1 {
		t.Fatalf("requeue: %+v %v", res, err)
	}
	again, err := e.tool.Requeue(context.Background(), []string{id}, ops.RequeueOptions{})
	if err != nil || len(again.Requeued) != 0 || len(again.Skipped) != 1 {
		t.Fatalf("second requeue should skip: %+v %v", again, err)
	}
	ctx := context.Background()
	ids, _ := e.redis.Client.LRange(ctx, store.PendingList, 0, -1).Result()
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("dispatch:pending = %v, want [%s] once", ids, id)
	}
	rec, err := store.New(e.redis.Client).Delivery(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d := rec.Delivery
	if d.Status != proto.DeliveryPending || d.Attempts != 0 || d.CompletedAt != nil || d.ResponseStatus != nil || d.ErrorMessage != nil || d.NextRetryAt != nil {
		t.Fatalf("record not reset: %s", rec.Raw)
	}
	// A 48-hour-old delivery would be failed as stale without a send; the
	// reset restarts its clock, as a new delivery's.
	if age := time.Since(d.AttemptedAt.Time); age > time.Minute {
		t.Fatalf("attempted_at is %s old; want now", age)
	}
	// The redrive is stamped as fresh evidence for the engines' breakers.
	if d.RequeuedAt == nil || !d.RequeuedAt.Equal(d.AttemptedAt.Time) {
		t.Fatalf("jetrelay_requeued_at = %v, want the requeue's time %s", d.RequeuedAt, d.AttemptedAt)
	}
	if ttl, _ := e.redis.Client.TTL(ctx, store.DeliveryKey(id)).Result(); ttl < 13*24*time.Hour {
		t.Fatalf("TTL %s; want admin's 14 days again", ttl)
	}
	score, _ := e.redis.Client.ZScore(ctx, store.DeliveryIndexKey(sub), id).Result()
	if int64(score) != d.AttemptedAt.UnixMilli() {
		t.Fatalf("deliveries:{sub} score %v, want the new attempted_at %d", score, d.AttemptedAt.UnixMilli())
	}
}

func TestCommands_RedisDownGivesAClearErrorNamingTheServer(t *testing.T) {
	e := newOpsEnv(t)
	addr := e.redis.Server.Addr()
	if err := e.redis.Server.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"deliveries", "list"},
		{"deliveries", "requeue", "del_x"},
		{"deliveries", "inspect", "del_x"},
		{"quarantine", "list"},
		{"status"},
		{"events", "emit", "--tenant", "acme", "--type", "budget.exhausted"},
	} {
		_, _, err := e.cli(t, map[string]string{"REDIS_URL": "redis://" + addr}, args...)
		if err == nil || !strings.Contains(err.Error(), "Redis at "+addr+" does not answer") {
			t.Errorf("%v: err = %v, want a clear Redis error naming %s", args, err, addr)
		}
	}
}

func TestRequeue_ConcurrentRunsPushEachDeliveryOnce(t *testing.T) {
	e := newOpsEnv(t)
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	var ids []string
	for i := range 50 {
		ids = append(ids, e.failed(t, sub, time.Now().Add(time.Duration(-i)*time.Second)))
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := e.tool.Requeue(context.Background(), ids, ops.RequeueOptions{})
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	pushed, _ := e.redis.Client.LRange(context.Background(), store.PendingList, 0, -1).Result()
	seen := map[string]int{}
	for _, id := range pushed {
		seen[id]++
	}
	if len(pushed) != len(ids) || len(seen) != len(ids) {
		t.Fatalf("8 concurrent requeues of %d deliveries pushed %d ids (%d distinct); want each once", len(ids), len(pushed), len(seen))
	}
}
