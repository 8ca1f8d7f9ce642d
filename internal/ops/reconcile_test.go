package ops_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/metrics"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/reconcile"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// retrying stores a RETRYING delivery of sub, created at attemptedAt, whose
// retry was due at nextRetry, indexed like admin's and queued nowhere: what
// a lost wake-up leaves behind.
func (e *opsEnv) retrying(t *testing.T, sub string, attemptedAt, nextRetry time.Time) string {
	t.Helper()
	id := e.delivery(t, sub, proto.DeliveryRetrying, attemptedAt)
	if _, err := store.New(e.redis.Client).UpdateDelivery(context.Background(), id, func(*proto.Delivery) (store.Patch, error) {
		return store.Patch{{Name: "attempts", Value: 1}, {Name: "next_retry_at", Value: nextRetry}, {Name: "error_message", Value: "HTTP 503"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *opsEnv) reconciler(t *testing.T, tune ...func(*reconcile.Config)) *reconcile.Reconciler {
	t.Helper()
	cfg := reconcile.Config{Queue: e.qc, InstanceID: "ops-test", Margin: time.Minute, Logger: testLogger(t)}
	for _, f := range tune {
		f(&cfg)
	}
	r, err := reconcile.New(e.redis.Client, e.js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReconciler_PutsBackStrandedDeliveriesFailsStaleOnesAndNeverTouchesQueuedOnes(t *testing.T) {
	e := newOpsEnv(t)
	stream := e.waitingStream(t)
	ctx := context.Background()
	now := time.Now().UTC()
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	paused := e.subscription(t, "acme", "https://hooks.example.com/paused")
	st := store.New(e.redis.Client)

	// Stranded: a retry whose wake-up was lost, a new delivery in no list,
	// one past the stale cutoff, and one an engine writes between the two
	// sweeps (so it is handled, not stranded).
	lostRetry := e.retrying(t, sub, now.Add(-20*time.Minute), now.Add(-10*time.Minute))
	lostNew := e.delivery(t, sub, proto.DeliveryPending, now.Add(-10*time.Minute))
	stale := e.delivery(t, sub, proto.DeliveryPending, now.Add(-48*time.Hour))
	handled := e.delivery(t, sub, proto.DeliveryPending, now.Add(-10*time.Minute))
	// Queued somewhere, all older than the margin.
	inPending := e.delivery(t, sub, proto.DeliveryPending, now.Add(-10*time.Minute))
	e.redis.Client.LPush(ctx, store.PendingList, inPending)
	moving := e.delivery(t, sub, proto.DeliveryPending, now.Add(-10*time.Minute))
	e.redis.Client.SAdd(ctx, store.BridgesSet, "bridge-1")
	e.redis.Client.LPush(ctx, store.ProcessingList("bridge-1"), moving)
	legacy := e.delivery(t, sub, proto.DeliveryPending, now.Add(-10*time.Minute))
	e.redis.Client.LPush(ctx, store.LegacyProcessingList, legacy)
	scheduled := e.retrying(t, sub, now.Add(-20*time.Minute), now.Add(-10*time.Minute))
	if _, err := e.js.PublishMsg(ctx, queue.NewScheduleMsg(e.qc, scheduled, now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	held := e.delivery(t, paused, proto.DeliveryPending, now.Add(-10*time.Minute))
	if _, err := e.js.PublishMsg(ctx, queue.NewHeldMsg(e.qc, paused, held, now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	working := e.retrying(t, sub, now.Add(-20*time.Minute), now.Add(-10*time.Minute))
	if _, err := e.js.PublishMsg(ctx, queue.NewMsg(e.qc.Subject, working)); err != nil {
		t.Fatal(err)
	}
	// On its subscription's ordered line (a strict line holds it for as
	// long as the line's head keeps failing).
	ordered := e.subscription(t, "acme", "https://hooks.example.com/ordered")
	lined := e.retrying(t, ordered, now.Add(-20*time.Minute), now.Add(-10*time.Minute))
	if _, err := e.js.PublishMsg(ctx, queue.NewMsg(e.qc.OrderedSubject(ordered), lined)); err != nil {
		t.Fatal(err)
	}
	queued := []string{inPending, moving, legacy, scheduled, held, working, lined}
	before := map[string]string{}
	for _, id := range append(queued, handled) {
		raw, _ := e.redis.Client.Get(ctx, store.DeliveryKey(id)).Result()
		before[id] = raw
	}

	r := e.reconciler(t)
	m := metrics.New(metrics.Options{})
	m.WatchReconciler(r.Stats)

	first, err := r.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Stuck != 4 || first.Requeued != 0 || first.Failed != 0 {
		t.Fatalf("first sweep: %+v; want the 4 stranded deliveries found stuck and nothing done before a second look", first)
	}
	in, err := e.tool.Inspect(ctx, lostRetry, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.Where.State != "stuck" || !strings.Contains(in.Next, "deliveries requeue "+lostRetry) {
		t.Errorf("inspect of a stranded retry: where=%+v next=%q; want stuck", in.Where, in.Next)
	}
	for _, id := range queued {
		if in, err := e.tool.Inspect(ctx, id, nil); err != nil || in.Where.State == "stuck" || in.Where.State == "nowhere" {
			t.Errorf("inspect of queued %s: %+v %v", id, in.Where, err)
		}
	}
	// An engine handles one meanwhile (a late copy delivered it).
	if _, err := st.UpdateDelivery(ctx, handled, func(*proto.Delivery) (store.Patch, error) {
		return store.Patch{{Name: "status", Value: proto.DeliverySuccess}, {Name: "attempts", Value: 1}, {Name: "completed_at", Value: time.Now()}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	before[handled], _ = e.redis.Client.Get(ctx, store.DeliveryKey(handled)).Result()

	second, err := r.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Requeued != 2 || second.Failed != 1 {
		t.Fatalf("second sweep: %+v; want 2 put back and 1 failed as stale", second)
	}
	pending, _ := e.redis.Client.LRange(ctx, store.PendingList, 0, -1).Result()
	if len(pending) != 3 || !slices.Contains(pending, lostRetry) || !slices.Contains(pending, lostNew) || !slices.Contains(pending, inPending) {
		t.Fatalf("dispatch:pending = %v; want the two stranded ids and the one already there, once each", pending)
	}
	rec, err := st.Delivery(ctx, stale)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != proto.DeliveryFailed || rec.ErrorMessage == nil || *rec.ErrorMessage != "Delivery expired: 48h old (max 24h)" || rec.CompletedAt == nil {
		t.Fatalf("stale delivery: %s %v; want FAILED with the reference's expiry message", rec.Status, rec.ErrorMessage)
	}
	for id, raw := range before {
		if now, _ := e.redis.Client.Get(ctx, store.DeliveryKey(id)).Result(); now != raw {
			t.Errorf("queued or handled delivery %s was rewritten:\n%s\n%s", id, raw, now)
		}
	}
	if info, _ := stream.Info(ctx); info.State.Msgs != 4 {
		t.Errorf("stream holds %d messages, want the 4 it was given", info.State.Msgs)
	}

	// Put back, they are queued again: a third sweep finds nothing.
	third, err := r.Sweep(ctx)
	if err != nil || third.Stuck != 0 || third.Requeued != 0 {
		t.Fatalf("third sweep: %+v %v; want nothing stuck", third, err)
	}
	for name, want := range map[string]float64{"jetrelay_reconciler_requeued_total": 2, "jetrelay_reconciler_failed_total": 1, "jetrelay_reconciler_stuck": 0} {
		if got := metricValue(t, m, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	rep, err := e.tool.Status(ctx, nil)
	if err != nil || rep.Reconciler == nil || rep.Reconciler.Requeued != 2 || rep.Reconciler.Failed != 1 || rep.Reconciler.Stuck != 0 {
		t.Fatalf("status: %+v %v; want 2 put back, 1 failed, 0 stuck", rep.Reconciler, err)
	}
	out, stderr, err := e.cli(t, nil, "status")
	if err != nil || !strings.Contains(out, "0 stuck now; 2 put back, 1 failed as stale in all") {
		t.Fatalf("status output lacks the reconciler line: %v\n%s%s", err, out, stderr)
	}
}

func TestReconciler_AStrandedRetryIsDeliveredAndRequeueAcceptsOnlyStuckOnes(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	recv := receiver.New()
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	sub := e.subscription(t, "acme", srv.URL+"/hooks")
	secret, err := e.redis.Client.Get(ctx, store.SecretKey(sub)).Result()
	if err != nil {
		t.Fatal(err)
	}
	ep := recv.Handle("/hooks", secret, receiver.Healthy())
	now := time.Now().UTC()
	lost := e.retrying(t, sub, now.Add(-20*time.Minute), now.Add(-10*time.Minute))
	lostNew := e.delivery(t, sub, proto.DeliveryPending, now.Add(-10*time.Minute))
	byHand := e.retrying(t, sub, now.Add(-20*time.Minute), now.Add(-10*time.Minute))
	queued := e.retrying(t, sub, now.Add(-20*time.Minute), now.Add(-10*time.Minute))
	if _, err := queue.EnsureStream(ctx, e.js, e.qc); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.PublishMsg(ctx, queue.NewScheduleMsg(e.qc, queued, now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}

	res, err := e.tool.Requeue(ctx, []string{byHand, queued}, ops.RequeueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requeued) != 1 || res.Requeued[0] != byHand || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "still queued (scheduled)") {
		t.Fatalf("requeue: %+v; want the stuck one requeued and the scheduled one refused", res)
	}

	r := e.reconciler(t)
	for range 2 {
		if _, err := r.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.runPipeline(t)
	st := store.New(e.redis.Client)
	eventually(t, time.Minute, "the stranded deliveries SUCCESS", func() bool {
		for _, id := range []string{lost, lostNew, byHand} {
			if rec, err := st.Delivery(ctx, id); err != nil || rec.Status != proto.DeliverySuccess {
				return false
			}
		}
		return true
	})
	if s := ep.Stats(); s.Unique != 3 || s.Duplicates != 0 {
		t.Fatalf("receiver saw %+v; want the three stranded deliveries once each", s)
	}
	if rec, _ := st.Delivery(ctx, queued); rec.Status != proto.DeliveryRetrying {
		t.Fatalf("the scheduled delivery was sent ahead of its wake-up: %s", rec.Status)
	}
}

func TestReconciler_ReadsZeroWhileAHealthyPipelineRetriesAndDelivers(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	recv := receiver.New()
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	sub := e.subscription(t, "acme", srv.URL+"/flaky")
	secret, err := e.redis.Client.Get(ctx, store.SecretKey(sub)).Result()
	if err != nil {
		t.Fatal(err)
	}
	ep := recv.Handle("/flaky", secret, receiver.FailFirst(2)) // two retries each: a short nak, then a wake-up
	// The breaker stays closed, and 4 events fail at most 8 times in a row
	// (auto-disable is at 10): every delivery goes the retry path.
	e.runPipeline(t, func(c *engine.Config) { c.Breaker = engine.BreakerConfig{Threshold: 100} })
	const n = 4
	for range n {
		if _, _, err := e.admin.Emit(ctx, admin.Event{EventType: "budget.exhausted", TenantID: "acme"}, admin.TraceSnapshot{}); err != nil {
			t.Fatal(err)
		}
	}
	// A margin far below the default: every hop of a healthy delivery is
	// still shorter, so nothing may be called stuck.
	r := e.reconciler(t, func(c *reconcile.Config) { c.Margin = 500 * time.Millisecond })
	eventually(t, 2*time.Minute, "every delivery at the receiver", func() bool {
		if _, err := r.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		return ep.Stats().Unique == n
	})
	for range 2 {
		if _, err := r.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s := r.Stats(); s.Requeued != 0 || s.Failed != 0 || s.Stuck != 0 || s.Sweeps < 3 {
		t.Fatalf("reconciler on a healthy system: %+v; want 0 put back, 0 failed, 0 stuck", s)
	}
	if s := ep.Stats(); s.Duplicates != 0 {
		t.Fatalf("receiver saw %+v; want no duplicates", s)
	}
}

func TestReconciler_OneBridgeAtATimeSweepsAndPutsBackOnce(t *testing.T) {
	e := newOpsEnv(t)
	if _, err := queue.EnsureStream(context.Background(), e.js, e.qc); err != nil {
		t.Fatal(err)
	}
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	lost := e.delivery(t, sub, proto.DeliveryPending, time.Now().Add(-10*time.Minute))
	var rs []*reconcile.Reconciler
	for _, id := range []string{"bridge-a", "bridge-b"} {
		rs = append(rs, e.reconciler(t, func(c *reconcile.Config) { c.InstanceID, c.Period = id, 50*time.Millisecond }))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() { _ = r.Run(ctx) })
	}
	stop := func() { cancel(); wg.Wait() }
	t.Cleanup(stop)

	sweeps := func() uint64 { return rs[0].Stats().Sweeps + rs[1].Stats().Sweeps }
	eventually(t, 30*time.Second, "the stranded delivery put back", func() bool {
		n, _ := e.redis.Client.LLen(context.Background(), store.PendingList).Result()
		return n > 0
	})
	after := sweeps()
	eventually(t, 30*time.Second, "five more sweeps", func() bool { return sweeps() >= after+5 })
	stop()
	pending, _ := e.redis.Client.LRange(context.Background(), store.PendingList, 0, -1).Result()
	if len(pending) != 1 || pending[0] != lost {
		t.Fatalf("dispatch:pending = %v; want %s once", pending, lost)
	}
	a, b := rs[0].Stats(), rs[1].Stats()
	if (a.Sweeps > 0) == (b.Sweeps > 0) || a.Requeued+b.Requeued != 1 {
		t.Fatalf("bridge-a %+v, bridge-b %+v; want one of them sweeping, and one put-back", a, b)
	}
}

func TestReconciler_CoversALargeIndexInBoundedSweeps(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	if _, err := queue.EnsureStream(ctx, e.js, e.qc); err != nil {
		t.Fatal(err)
	}
	// Two subscriptions, 25 terminal deliveries sharing one attempted_at
	// (ties across page ends), and one stranded delivery at each index's end.
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var lost []string
	for _, url := range []string{"https://a.example.com", "https://b.example.com"} {
		sub := e.subscription(t, "acme", url)
		for range 25 {
			e.failed(t, sub, at)
		}
		lost = append(lost, e.delivery(t, sub, proto.DeliveryPending, at.Add(time.Minute)))
	}
	r := e.reconciler(t, func(c *reconcile.Config) { c.Batch = 4 })
	var read int
	for sweep := 0; ; sweep++ {
		res, err := r.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Read > 4 {
			t.Fatalf("sweep %d read %d index entries, more than its batch of 4", sweep, res.Read)
		}
		read += res.Read
		if n, _ := e.redis.Client.LLen(ctx, store.PendingList).Result(); n == 2 {
			break
		}
		if sweep > 40 {
			t.Fatalf("after %d sweeps (%d entries read) dispatch:pending holds fewer than the 2 stranded deliveries", sweep, read)
		}
	}
	pending, _ := e.redis.Client.LRange(ctx, store.PendingList, 0, -1).Result()
	slices.Sort(pending)
	slices.Sort(lost)
	if !slices.Equal(pending, lost) {
		t.Fatalf("dispatch:pending = %v, want %v", pending, lost)
	}
	if read < 52 {
		t.Fatalf("read %d index entries; a pass over both indexes is 52", read)
	}
}

// metricValue reads one unlabelled series from m's registry.
func metricValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		mt := f.GetMetric()[0]
		if c := mt.GetCounter(); c != nil {
			return c.GetValue()
		}
		return mt.GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}
