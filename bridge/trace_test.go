package bridge_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
)

// streamTraceparents returns the lowercase traceparent header of each work item
// in the dispatch stream, by delivery id.
func (e *env) streamTraceparents(t *testing.T) map[string]string {
	t.Helper()
	got := map[string]string{}
	for id, h := range e.streamHeaders(t) {
		// nats.Header is case-sensitive: only the exact lowercase name counts.
		if v := h["traceparent"]; len(v) == 1 {
			got[id] = v[0]
		} else {
			got[id] = ""
		}
	}
	return got
}

// streamHeaders returns the headers of each work item in the dispatch
// stream, by delivery id.
func (e *env) streamHeaders(t *testing.T) map[string]nats.Header {
	t.Helper()
	ctx := testCtx(t)
	n := e.streamMsgs(t)
	c := queue.Config{}.WithDefaults()
	cons, err := e.js.CreateConsumer(ctx, queue.DefaultStream, jetstream.ConsumerConfig{
		Name: "header-reader", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: -1,
		FilterSubjects: []string{c.Subject, c.ScheduleSubjects(), c.HeldSubjects(""), c.OrderedSubjects()}, // not the keeper
	})
	if err != nil {
		t.Fatalf("reader consumer: %v", err)
	}
	defer e.js.DeleteConsumer(ctx, queue.DefaultStream, "header-reader")
	batch, err := cons.Fetch(int(n), jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	got := map[string]nats.Header{}
	for m := range batch.Messages() {
		got[string(m.Data())] = m.Headers()
	}
	return got
}

func TestTracing_PublishSpansAreInTheDeliveryTraceAndTravelInALowercaseHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	exp, tp := tracedDelivery(t, e, "del_traced", traceID)
	e.lpush(t, store.PendingList, []string{"del_traced", "del_no_record"})
	start(t, e.newBridge(t, bridge.Config{TracerProvider: tp}))
	eventually(t, 10*time.Second, "both ids in the stream and both publish spans ended", func() bool {
		return e.streamMsgs(t) == 2 && len(exp.GetSpans()) == 2
	})

	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.SpanKind != trace.SpanKindProducer || s.Name != "send jetrelay.dispatch" {
			t.Errorf("unexpected span %q (%s)", s.Name, s.SpanKind)
			continue
		}
		for _, kv := range s.Attributes {
			if kv.Key == "jetrelay.delivery_id" {
				spans[kv.Value.AsString()] = s
			}
		}
	}
	headers := e.streamTraceparents(t)
	traced := spans["del_traced"]
	if traced.SpanContext.TraceID().String() != traceID || !traced.Parent.IsRemote() {
		t.Errorf("publish span of del_traced is in trace %s (parent remote: %v), want the delivery's %s",
			traced.SpanContext.TraceID(), traced.Parent.IsRemote(), traceID)
	}
	if want := "00-" + traceID + "-" + traced.SpanContext.SpanID().String() + "-01"; headers["del_traced"] != want {
		t.Errorf("work item header traceparent = %q, want %q", headers["del_traced"], want)
	}
	untraced := spans["del_no_record"]
	if !untraced.SpanContext.IsValid() || untraced.Parent.IsValid() {
		t.Errorf("a delivery without a record should get a root publish span, got %+v", untraced.Parent)
	}
	if headers["del_no_record"] == "" {
		t.Errorf("work item without a record carries no traceparent")
	}
}

func TestTracing_ABridgeWithoutATracerAddsNoHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.lpush(t, store.PendingList, []string{"del_plain"})
	// Left by an older jetrelay: migrated into the stream like any id.
	if err := e.rdb.ZAdd(testCtx(t), store.LegacyDeferredZSet, redis.Z{Score: 1, Member: "del_plain_parked"}).Err(); err != nil {
		t.Fatal(err)
	}
	start(t, e.newBridge(t, bridge.Config{}))
	eventually(t, 10*time.Second, "both ids in the stream", func() bool { return e.streamMsgs(t) == 2 })
	for id, h := range e.streamTraceparents(t) {
		if h != "" {
			t.Errorf("%s: traceparent = %q, want none", id, h)
		}
	}
}

// tracedDelivery stores a delivery record carrying traceID and returns an
// in-memory exporter and the tracer provider that feeds it.
func tracedDelivery(t *testing.T, e *env, id, traceID string) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	if err := e.rdb.Set(testCtx(t), store.DeliveryKey(id), `{"delivery_id":"`+id+`","trace_id":"`+traceID+`"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	return exp, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
}

// Each work item names its delivery's subscription and event, read from
// the delivery record, so the engine reads the delivery and its records in
// one round trip; an id no header can carry (from a hostile record) and a
// delivery without a record go out without, and the engine reads them one
// after the other.
func TestRun_NamesEachDeliverysSubscriptionAndEventInItsWorkItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	for id, rec := range map[string]string{
		"del_plain":   `{"delivery_id":"del_plain","subscription_id":"whsub_a","event_id":"evt_1"}`,
		"del_hostile": `{"delivery_id":"del_hostile","subscription_id":"whsub_b\r\nX-Injected: 1","event_id":"evt_2"}`,
	} {
		if err := e.rdb.Set(ctx, store.DeliveryKey(id), rec, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	e.lpush(t, store.PendingList, []string{"del_plain", "del_hostile", "del_no_record"})
	start(t, e.newBridge(t, bridge.Config{}))
	eventually(t, 10*time.Second, "the three ids in the stream", func() bool { return e.streamMsgs(t) == 3 })

	headers := e.streamHeaders(t)
	if h := headers["del_plain"]; h.Get(queue.SubscriptionHeader) != "whsub_a" || h.Get(queue.EventHeader) != "evt_1" {
		t.Errorf("del_plain's work item headers = %v, want its subscription and event", h)
	}
	for _, id := range []string{"del_hostile", "del_no_record"} {
		h := headers[id]
		if h.Get(queue.SubscriptionHeader) != "" || h.Get(queue.EventHeader) != "" || h.Get("X-Injected") != "" {
			t.Errorf("%s's work item headers = %v, want no route", id, h)
		}
	}
}

// The routing fields come back with the move that takes the ids, whether
// it moves a waiting backlog or waits for each id as it comes: the bridge
// sends no read of its own (no MGET), which at a rate where each id finds
// it waiting was one more Redis round trip per delivery.
func TestRun_ReadsTheRoutesWithTheMoveWithoutAReadOfItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	ids := []string{"del_0", "del_1", "del_2", "del_3", "del_4"}
	for i, id := range ids {
		rec := fmt.Sprintf(`{"delivery_id":%q,"subscription_id":"whsub_%d","event_id":"evt_%d"}`, id, i, i)
		if err := e.rdb.Set(ctx, store.DeliveryKey(id), rec, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	sent := &sentCommands{}
	rdb := redis.NewClient(&redis.Options{Addr: e.rdb.Options().Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(sent)
	b, err := bridge.New(rdb, e.js, bridge.Config{InstanceID: "test-bridge"})
	if err != nil {
		t.Fatal(err)
	}
	e.lpush(t, store.PendingList, ids[:2]) // a backlog, moved as a batch
	start(t, b)
	eventually(t, 10*time.Second, "the backlog in the stream", func() bool { return e.streamMsgs(t) == 2 })
	for n, id := range ids[2:] { // each found by a waiting move
		e.lpush(t, store.PendingList, []string{id})
		eventually(t, 10*time.Second, id+" in the stream", func() bool { return e.streamMsgs(t) == uint64(n+3) })
	}

	headers := e.streamHeaders(t)
	for i, id := range ids {
		if h := headers[id]; h.Get(queue.SubscriptionHeader) != fmt.Sprintf("whsub_%d", i) || h.Get(queue.EventHeader) != fmt.Sprintf("evt_%d", i) {
			t.Errorf("%s's work item headers = %v, want its subscription and event", id, h)
		}
	}
	if n := sent.count("mget"); n > 0 {
		t.Errorf("the bridge sent %d MGETs of its own; want the routes read by its moves", n)
	}
}

// sentCommands counts the commands a client sends, by name, pipelined or
// not.
type sentCommands struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *sentCommands) add(cmds ...redis.Cmder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	for _, c := range cmds {
		s.n[c.Name()]++
	}
}

func (s *sentCommands) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[name]
}

func (s *sentCommands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *sentCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.add(cmd)
		return next(ctx, cmd)
	}
}
func (s *sentCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.add(cmds...)
		return next(ctx, cmds)
	}
}
