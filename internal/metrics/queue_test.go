package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// dispatchQueue starts a JetStream server with the dispatch stream and its
// consumer, as a running jetrelay has them.
func dispatchQueue(t *testing.T) (jetstream.JetStream, queue.Config) {
	t.Helper()
	_, _, js := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qc := queue.Config{}.WithDefaults()
	if _, err := queue.EnsureStream(ctx, js, qc); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.EnsureConsumer(ctx, js, qc); err != nil {
		t.Fatal(err)
	}
	return js, qc
}

func TestWatchQueue_StreamMessagesLeaveTheKeepersOut(t *testing.T) {
	js, qc := dispatchQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Two work items, and the keepers of two bridges.
	for _, id := range []string{"d1", "d2"} {
		if _, err := js.PublishMsg(ctx, queue.NewMsg(qc.Subject, id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, bridge := range []string{"one", "two"} {
		if err := queue.Keep(ctx, js, qc, bridge); err != nil {
			t.Fatal(err)
		}
	}
	m := New(Options{ScrapeTimeout: 5 * time.Second})
	m.WatchQueue(js, qc)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "jetrelay_stream_messages" {
			if got := mf.GetMetric()[0].GetGauge().GetValue(); got != 2 {
				t.Errorf("jetrelay_stream_messages = %v, want the 2 work items (the keepers left out)", got)
			}
			return
		}
	}
	t.Fatal("jetrelay_stream_messages not exposed")
}
