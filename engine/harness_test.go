package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/redisproc"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

// testKey is the contract's §4.1 test key (bytes 0x00..0x1f).
const testKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// env is a whole jetrelay pipeline on real parts: a redis-server process, an
// in-process JetStream server, the bridge, the engine and an HTTP receiver.
type env struct {
	redis  *testenv.RedisEnv
	nc     *nats.Conn
	js     jetstream.JetStream
	qc     queue.Config
	store  *store.Store
	admin  *admin.Writer
	recv   *receiver.Receiver
	engine *engine.Engine
	// newEngine builds another engine on the same Redis, stream and
	// transports, as a restarted replica would be; stopEngine stops the
	// env's own engine (once).
	newEngine  func(t *testing.T) *engine.Engine
	stopEngine func()
	base       string // receiver base URL
	tenant     string
}

type envOptions struct {
	adminKey  string // key admin encrypts secrets with ("" = plaintext)
	engineKey string // key the engine decrypts with ("" = none)
	redis     redisproc.Options
	handler   http.Handler // extra receiver routes under /custom/
	engine    func(*engine.Config)
	timeout   time.Duration        // webhook request timeout, default 2s
	ackWait   time.Duration        // consumer AckWait, default 5s
	tracer    trace.TracerProvider // the bridge's and the engine's spans; nil: none
	// natsURLs, when set, is an external NATS (a testenv.Cluster) to use
	// instead of an in-process server, with a stream of streamReplicas.
	natsURLs       string
	streamReplicas int
	// transports registers more transports (e.g. natsink on the test's
	// NATS connection) next to the webhook one.
	transports func(*transport.Registry, *nats.Conn)
	// beforeRun, when set, is called with the engine before it runs.
	beforeRun func(*engine.Engine)
	// ordering is the fleet default ordering of the bridge and the engine.
	ordering proto.Ordering
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{redis: testenv.Redis(t, o.redis), tenant: "acme-corp"}
	if o.natsURLs == "" {
		_, e.nc, e.js = testenv.NATS(t)
	} else {
		e.nc, e.js = connectCluster(t, o.natsURLs)
	}
	e.store = store.New(e.redis.Client)
	e.admin = admin.NewWriter(e.redis.Client, parseKey(t, o.adminKey))
	e.recv = receiver.New()
	mux := http.NewServeMux()
	mux.Handle("/", e.recv)
	if o.handler != nil {
		mux.Handle("/custom/", o.handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.base = srv.URL

	if o.ackWait == 0 {
		o.ackWait = 5 * time.Second
	}
	e.qc = queue.Config{AckWait: o.ackWait, Replicas: o.streamReplicas}.WithDefaults()
	if o.timeout == 0 {
		o.timeout = 2 * time.Second
	}
	wh, err := webhook.New(webhook.Config{RequestTimeout: o.timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wh.Close)
	reg := transport.NewRegistry()
	reg.Register("http", wh)
	reg.Register("https", wh)
	if o.transports != nil {
		o.transports(reg, e.nc)
	}
	cfg := engine.Config{
		Queue: e.qc, Workers: 8, SecretKey: parseKey(t, o.engineKey),
		InfraRetryMin: 100 * time.Millisecond, InfraRetryMax: time.Second,
		SuccessFlush: 100 * time.Millisecond, DrainTimeout: 5 * time.Second, Logger: testLogger(t),
		// Short enough for tests, and message schedules (not delayed naks)
		// for anything longer than 200ms, so that path is exercised everywhere.
		ParkAfter: 200 * time.Millisecond, InactiveRecheck: time.Second,
		TracerProvider: o.tracer,
		Ordering:       o.ordering,
	}
	if o.engine != nil {
		o.engine(&cfg)
	}
	eng, err := engine.New(e.redis.Client, e.js, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.engine = eng
	if o.beforeRun != nil {
		o.beforeRun(eng)
	}
	br, err := bridge.New(e.redis.Client, e.js, bridge.Config{Queue: e.qc, InstanceID: "test-bridge", TracerProvider: o.tracer, Ordering: o.ordering})
	if err != nil {
		t.Fatal(err)
	}
	e.newEngine = func(t *testing.T) *engine.Engine {
		eng, err := engine.New(e.redis.Client, e.js, reg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	ctx, cancel := context.WithCancel(context.Background())
	ectx, ecancel := context.WithCancel(ctx)
	brDone, engDone := make(chan struct{}), make(chan struct{})
	go func() { _ = br.Run(ctx); close(brDone) }()
	go func() {
		if err := eng.Run(ectx); err != nil {
			t.Errorf("engine.Run: %v", err)
		}
		close(engDone)
	}()
	e.stopEngine = func() { ecancel(); <-engDone }
	t.Cleanup(func() { cancel(); <-brDone; <-engDone })
	return e
}

func parseKey(t *testing.T, b64 string) *proto.SecretKey {
	t.Helper()
	if b64 == "" {
		return nil
	}
	k, err := proto.ParseSecretKey(b64)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ptr[T any](v T) *T { return &v }

// fastPolicy retries quickly so tests of retry paths stay short.
func fastPolicy(retries int) *proto.RetryPolicy {
	return &proto.RetryPolicy{MaxRetries: ptr(retries), InitialDelayMs: ptr(int64(100)), BackoffMultiplier: ptr(1.0), MaxDelayMs: ptr(int64(1000))}
}

// subscribe creates a subscription (as admin does) to a receiver endpoint.
func (e *env) subscribe(t *testing.T, path string, b receiver.Behaviour, mutate func(*admin.Subscription)) (string, string, *receiver.Endpoint) {
	t.Helper()
	// Created a while ago: a brand-new subscription without a secret is
	// (correctly) held back until admin's separate secret write lands.
	s := admin.Subscription{TenantID: e.tenant, URL: e.base + path, EventTypes: []string{"budget.exhausted"}, RetryPolicy: fastPolicy(2),
		CreatedAt: time.Now().Add(-time.Hour)}
	if mutate != nil {
		mutate(&s)
	}
	id, secret, err := e.admin.CreateSubscription(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return id, secret, e.recv.Handle(path, secret, b)
}

// event returns a realistic runtime-emitted budget.exhausted event.
func (e *env) event() admin.Event {
	return admin.Event{
		EventType: "budget.exhausted", TenantID: e.tenant, Scope: "tenant:acme-corp/workspace:prod",
		Actor: &proto.Actor{Type: "api_key", KeyID: "key_7f3a"}, Source: "cycles-server",
		Data:      json.RawMessage(`{"ledger_id":"led_01hx","unit":"TOKENS","allocated":10000,"remaining":0,"spent":10000}`),
		RequestID: "2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b", TraceID: proto.NewTraceID(),
	}
}

// deliver saves ev and enqueues one delivery of it to sub exactly as admin's
// live dispatch does (SAVE_AND_ENQUEUE_ONCE_LUA → dispatch:pending).
func (e *env) deliver(t *testing.T, sub string, ev admin.Event, mutate func(*admin.Delivery)) string {
	t.Helper()
	ctx := context.Background()
	if ev.EventType != "" {
		id, err := e.admin.SaveEvent(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		ev.EventID = id
	}
	d := admin.Delivery{SubscriptionID: sub, EventID: ev.EventID, EventType: "budget.exhausted", TraceID: ev.TraceID}
	if mutate != nil {
		mutate(&d)
	}
	if d.DeliveryID == "" {
		d.DeliveryID = admin.DeliveryID(d.EventID, d.SubscriptionID)
	}
	if ok, err := e.admin.Enqueue(ctx, d); err != nil || !ok {
		t.Fatalf("enqueue: ok=%v err=%v", ok, err)
	}
	return d.DeliveryID
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// final waits for delivery id to reach SUCCESS or FAILED and returns it.
func (e *env) final(t *testing.T, id string) *store.DeliveryRecord {
	t.Helper()
	var rec *store.DeliveryRecord
	waitFor(t, 20*time.Second, "delivery "+id+" to be final", func() bool {
		r, err := e.store.Delivery(context.Background(), id)
		if err == nil && r.Status.Terminal() {
			rec = r
			return true
		}
		return false
	})
	return rec
}

// idle waits until every queued work item has been settled: nothing pending
// in Redis or in the stream, nothing awaiting an ack.
func (e *env) idle(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, 20*time.Second, "the pipeline to go idle", func() bool {
		if n, _ := e.redis.Client.LLen(ctx, store.PendingList).Result(); n > 0 {
			return false
		}
		if n, _ := e.redis.Client.LLen(ctx, "dispatch:processing:test-bridge").Result(); n > 0 {
			return false
		}
		c, err := e.js.Consumer(ctx, e.qc.Stream, e.qc.Consumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

// parked reports whether delivery id waits in JetStream: a pending wake-up,
// or held for its (inactive) subscription.
func (e *env) parked(id string) bool {
	ctx := context.Background()
	if ok, _ := queue.IsScheduled(ctx, e.js, e.qc, id); ok {
		return true
	}
	raw, err := e.redis.Client.Get(ctx, store.DeliveryKey(id)).Bytes()
	if err != nil {
		return false
	}
	d, err := proto.ParseDelivery(raw)
	if err != nil {
		return false
	}
	ok, _ := queue.IsHeld(ctx, e.js, e.qc, d.SubscriptionID, id)
	return ok
}

func (e *env) subscription(t *testing.T, id string) *proto.Subscription {
	t.Helper()
	raw, err := e.redis.Client.Get(context.Background(), store.SubscriptionKey(id)).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	s, err := proto.ParseSubscription(raw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) rawDelivery(t *testing.T, id string) string {
	t.Helper()
	raw, err := e.redis.Client.Get(context.Background(), store.DeliveryKey(id)).Result()
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return raw
}

// testLogger sends the engine's log to the test log when JETRELAY_TEST_LOG is set.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("JETRELAY_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// connectCluster connects to a cluster's client URLs, reconnecting for as
// long as the test runs (nodes are stopped on purpose).
func connectCluster(t *testing.T, urls string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to the cluster: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// downEndpoint answers 503 until healthy is set, then 200, and notes the
// time of every request it gets.
type downEndpoint struct {
	healthy atomic.Bool
	mu      sync.Mutex
	at      []time.Time
}

func (d *downEndpoint) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	d.mu.Lock()
	d.at = append(d.at, time.Now())
	d.mu.Unlock()
	if d.healthy.Load() {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}

// sends returns the times of the requests so far.
func (d *downEndpoint) sends() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.at...)
}
