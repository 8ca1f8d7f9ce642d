package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/natsink"
)

// withNatsink registers natsink for nats:// on the engine's connection.
func withNatsink(t *testing.T) func(*transport.Registry, *nats.Conn) {
	return func(reg *transport.Registry, nc *nats.Conn) {
		sink, err := natsink.New(natsink.Config{Conn: nc})
		if err != nil {
			t.Fatal(err)
		}
		reg.Register("nats", sink)
	}
}

// The engine is transport-agnostic: a nats:// subscription gets the same
// retries, breaker and recovery as a webhook. Its destination here is a
// JetStream stream that is full (it refuses publishes) until the test
// makes room.
func TestBreaker_WorksTheSameForANATSSubscription(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{
		engine:     func(c *engine.Config) { c.Breaker = engine.BreakerConfig{Threshold: 3, OpenFor: 2 * time.Second} },
		transports: withNatsink(t),
	})
	ctx := context.Background()
	st, err := e.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "SINK", Subjects: []string{"sink.orders"}, MaxMsgs: 1, Discard: jetstream.DiscardNew,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.Publish(ctx, "sink.orders", []byte("filler")); err != nil {
		t.Fatal(err)
	}
	sub, _, _ := e.subscribe(t, "/unused", nil, func(s *admin.Subscription) { s.RetryPolicy = fastPolicy(10) })
	if _, err := e.store.UpdateSubscription(ctx, sub, func(*proto.Subscription) (store.Patch, error) {
		return store.Patch{{Name: "url", Value: "nats:///sink.orders"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	id := e.deliver(t, sub, e.event(), nil)

	attempts := func() int {
		r, err := e.store.Delivery(ctx, id)
		if err != nil {
			return -1
		}
		return r.Attempts
	}
	waitFor(t, 10*time.Second, "three refused publishes to open the breaker", func() bool { return attempts() == 3 })
	// Open: for the next second (well inside its 2 s) no attempt is used,
	// although the retry policy alone would retry every 100 ms.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if n := attempts(); n != 3 {
			t.Fatalf("attempts went to %d while the breaker was open", n)
		}
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	rec := e.final(t, id)
	if rec.Status != proto.DeliverySuccess || rec.Attempts != 4 {
		t.Fatalf("record = %s; want SUCCESS on the probe (attempt 4)", rec.Raw)
	}
	msg, err := st.GetLastMsgForSubject(ctx, "sink.orders")
	if err != nil || msg.Header.Get(proto.HeaderEventID) == "" || msg.Header.Get("traceparent") == "" {
		t.Fatalf("delivered message headers = %v (%v)", msg, err)
	}
}
