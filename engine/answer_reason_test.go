package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// failedReasons keeps the reasons of failed deliveries, the
// cycles_webhook_delivery_failed_total label.
type failedReasons struct {
	mu      sync.Mutex
	reasons []string
}

func (f *failedReasons) Sending(engine.Labels)           {}
func (f *failedReasons) Sent(engine.Labels, engine.Send) {}
func (f *failedReasons) PayloadInvalid(string, string)   {}
func (f *failedReasons) Decided(d engine.Decision) {
	if d.Kind == engine.Failed {
		f.mu.Lock()
		f.reasons = append(f.reasons, d.Reason)
		f.mu.Unlock()
	}
}

func (f *failedReasons) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reasons...)
}

// A NATS stream at its limit with DiscardNew answers "no": the delivery is
// failed with JetStream's reason and code, not as a send that got no answer.
func TestAnswerReason_AFullStreamsRefusalIsRecordedWithItsOwnReasonNotTransportError(t *testing.T) {
	t.Parallel()
	reasons := &failedReasons{}
	e := newEnv(t, envOptions{
		engine:     func(c *engine.Config) { c.Observer = reasons },
		transports: withNatsink(t),
	})
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "FULL", Subjects: []string{"full.orders"}, MaxMsgs: 1, Discard: jetstream.DiscardNew,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.Publish(ctx, "full.orders", []byte("filler")); err != nil {
		t.Fatal(err)
	}
	sub, _, _ := e.subscribe(t, "/unused", nil, func(s *admin.Subscription) { s.RetryPolicy = fastPolicy(0) })
	if _, err := e.store.UpdateSubscription(ctx, sub, func(*proto.Subscription) (store.Patch, error) {
		return store.Patch{{Name: "url", Value: "nats:///full.orders"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	id := e.deliver(t, sub, e.event(), nil)

	rec := e.final(t, id)
	if rec.Status != proto.DeliveryFailed || rec.Attempts != 1 {
		t.Fatalf("record = %s; want FAILED after its one attempt", rec.Raw)
	}
	if rec.ResponseStatus == nil || *rec.ResponseStatus != 503 || rec.ErrorMessage == nil || !strings.Contains(*rec.ErrorMessage, "maximum messages exceeded") {
		t.Errorf("record = %s; want response_status 503 and JetStream's refusal as error_message", rec.Raw)
	}
	waitFor(t, 10*time.Second, "the failed delivery's report", func() bool { return len(reasons.all()) == 1 })
	if got := reasons.all(); got[0] != "nats_stream_full" {
		t.Errorf("failed reason = %q, want nats_stream_full (an answer, not transport_error)", got[0])
	}
}
