package engine_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

// failingEndpoint answers 500 until healthy is set, then 200, and counts
// the requests it gets.
type failingEndpoint struct {
	healthy  atomic.Bool
	requests atomic.Int64
}

func (f *failingEndpoint) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.requests.Add(1)
	if f.healthy.Load() {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusInternalServerError)
}

// The measurement, on a short timeline: an endpoint answering 500
// for a long while (many open periods of its breaker, doubling) while one
// delivery after another arrives with max_retries 0. Each must be FAILED by
// its own send, with the endpoint's answer to it, and by the end of its
// schedule (first attempt + one open period): never with the breaker's
// older answer to somebody else's send, never held past that end.
func TestBreaker_NoDeliveryIsFailedUnsentWhileTheEndpointStaysDown(t *testing.T) {
	t.Parallel()
	down := &failingEndpoint{}
	const openFor = 300 * time.Millisecond
	e := newEnv(t, envOptions{handler: down, engine: func(c *engine.Config) {
		c.Breaker = engine.BreakerConfig{Threshold: 3, OpenFor: openFor, MaxOpenFor: 5 * time.Second}
	}})
	sub, _, _ := e.subscribe(t, "/custom/down", nil, func(s *admin.Subscription) {
		s.RetryPolicy = fastPolicy(0)
		s.DisableAfterFailures = 10_000 // the breaker is under test, not auto-disable
	})
	var ids []string
	for range 40 { // one every 150 ms for 6 s: past the longest open period
		ids = append(ids, e.deliver(t, sub, e.event(), nil))
		time.Sleep(150 * time.Millisecond) // the arrival rate is the scenario
	}
	unsent, late := 0, 0
	for _, id := range ids {
		rec := e.final(t, id)
		d := rec.Delivery
		if d.Status != proto.DeliveryFailed || d.Attempts < 1 || d.ErrorMessage == nil || *d.ErrorMessage != "HTTP 500" {
			unsent++
			t.Errorf("%s ended %s after %d sends with %q; want FAILED by its own send, HTTP 500", id, d.Status, d.Attempts, deref(d.ErrorMessage))
			continue
		}
		// Its schedule ends one open period after its creation; the
		// message schedule's 250 ms tick and a send come on top.
		if took := d.CompletedAt.Sub(d.AttemptedAt.Time); took > openFor+2*time.Second {
			late++
			t.Errorf("%s was held %s before its send, past the end of its schedule (one open period, %s)", id, took.Round(time.Millisecond), openFor)
		}
	}
	sends := down.requests.Load()
	t.Logf("%d deliveries, %d sends, %d failed unsent, %d late", len(ids), sends, unsent, late)
	if sends > int64(len(ids))+10 {
		t.Errorf("%d sends for %d deliveries with no retries: the open breaker must hold the backlog back, not send it twice", sends, len(ids))
	}
	if s := e.subscription(t, sub); s.ConsecutiveFailures != len(ids) {
		t.Errorf("consecutive_failures = %d, want %d (one per failed delivery)", s.ConsecutiveFailures, len(ids))
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// kindCounter counts one engine's decisions by kind.
type kindCounter struct {
	mu sync.Mutex
	n  map[engine.DecisionKind]int
}

func (c *kindCounter) Sending(engine.Labels)           {}
func (c *kindCounter) Sent(engine.Labels, engine.Send) {}
func (c *kindCounter) PayloadInvalid(string, string)   {}
func (c *kindCounter) Decided(d engine.Decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[engine.DecisionKind]int{}
	}
	c.n[d.Kind]++
}

func (c *kindCounter) count(k engine.DecisionKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// addEngine runs one more engine replica on e's Redis and stream (the
// shared durable consumer), as a second `jetrelay run` would.
func (e *env) addEngine(t *testing.T, mutate func(*engine.Config)) *engine.Engine {
	t.Helper()
	wh, err := webhook.New(webhook.Config{RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wh.Close)
	reg := transport.NewRegistry()
	reg.Register("http", wh)
	cfg := engine.Config{
		Queue: e.qc, Workers: 8, InfraRetryMin: 100 * time.Millisecond, InfraRetryMax: time.Second,
		SuccessFlush: 100 * time.Millisecond, DrainTimeout: 5 * time.Second, Logger: testLogger(t),
		ParkAfter: 200 * time.Millisecond, InactiveRecheck: time.Second,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	eng, err := engine.New(e.redis.Client, e.js, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		if err := eng.Run(ctx); err != nil {
			t.Errorf("second engine.Run: %v", err)
		}
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return eng
}

// openFor reports how long eng's breaker for sub stays open from now (0
// when it is not open).
func openFor(eng *engine.Engine, sub string) time.Duration {
	for _, b := range eng.OpenBreakers() {
		if b.SubscriptionID == sub && b.Open {
			return time.Until(b.OpenUntil)
		}
	}
	return 0
}

// The redrive: deliveries FAILED against an endpoint answering 500,
// both replicas' breakers open for their longest period (minutes), the
// endpoint fixed, then `deliveries requeue --status FAILED --subscription`.
// Every requeued delivery goes out within seconds, on either replica: the
// redrive is fresh evidence that closes a breaker opened before it.
func TestBreaker_ARedriveAfterTheEndpointRecoversIsDeliveredAtOnceOnEveryReplica(t *testing.T) {
	t.Parallel()
	down := &failingEndpoint{}
	// Ten failed sends open a replica's breaker, for its longest period at
	// once; without the redrive's evidence a requeued delivery would wait
	// that long (its schedule: one open period) before its send.
	breaker := engine.BreakerConfig{Threshold: 10, OpenFor: 3 * time.Minute, MaxOpenFor: 3 * time.Minute}
	first, second := &kindCounter{}, &kindCounter{}
	e := newEnv(t, envOptions{handler: down, engine: func(c *engine.Config) { c.Breaker, c.Observer = breaker, first }})
	other := e.addEngine(t, func(c *engine.Config) { c.Breaker, c.Observer = breaker, second })
	sub, _, _ := e.subscribe(t, "/custom/down", nil, func(s *admin.Subscription) {
		s.RetryPolicy = fastPolicy(0)
		s.DisableAfterFailures = 10_000
	})
	ctx := context.Background()

	// One delivery at a time until both replicas' breakers are open: each
	// fails by its own send until its replica has seen ten failures (a
	// replica already open holds the ones it gets).
	var failed int
	for n := 0; openFor(e.engine, sub) < time.Minute || openFor(other, sub) < time.Minute; n++ {
		if n == 200 {
			t.Fatalf("after %d deliveries the breakers are open for %s and %s; want both open", n, openFor(e.engine, sub), openFor(other, sub))
		}
		id := e.deliver(t, sub, e.event(), nil)
		waitFor(t, 20*time.Second, "delivery "+id+" to fail or be held", func() bool {
			rec, err := e.store.Delivery(ctx, id)
			if err != nil {
				return false
			}
			if rec.Status == proto.DeliveryFailed {
				failed++
				return true
			}
			return rec.Waiting != nil && *rec.Waiting == "breaker_open"
		})
	}
	if failed < 20 {
		t.Fatalf("%d deliveries FAILED before both breakers opened, want 20 (ten per replica)", failed)
	}
	t.Logf("%d deliveries FAILED; breakers open for %s and %s", failed, openFor(e.engine, sub).Round(time.Second), openFor(other, sub).Round(time.Second))

	down.healthy.Store(true)
	tool := ops.New(ops.Options{Redis: e.redis.Client, JetStream: e.js, Queue: e.qc})
	res, err := tool.RequeueMatching(ctx, ops.Filter{SubscriptionID: sub}, ops.RequeueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requeued) != failed {
		t.Fatalf("requeued %d of %d FAILED deliveries", len(res.Requeued), failed)
	}
	requeued := time.Now()
	waitFor(t, 15*time.Second, "every requeued delivery to be delivered", func() bool {
		for _, id := range res.Requeued {
			rec, err := e.store.Delivery(ctx, id)
			if err != nil || rec.Status != proto.DeliverySuccess {
				return false
			}
		}
		return true
	})
	took := time.Since(requeued)
	a, b := first.count(engine.Delivered), second.count(engine.Delivered)
	t.Logf("%d requeued deliveries delivered %s after the requeue (%d by one replica, %d by the other)", len(res.Requeued), took.Round(time.Millisecond), a, b)
	if a == 0 || b == 0 {
		t.Errorf("one replica delivered none of the requeued deliveries (%d and %d): the test did not show both replicas taking the redrive as evidence", a, b)
	}
	for _, eng := range []*engine.Engine{e.engine, other} {
		if d := openFor(eng, sub); d > 0 {
			t.Errorf("a replica's breaker is still open for %s after the redrive went out", d.Round(time.Second))
		}
	}
}
