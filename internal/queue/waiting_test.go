package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

func TestScheduleMsg_FiresOnceIntoTheWorkSubjectAndARescheduleReplacesIt(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := queue.Config{}
	if _, err := queue.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	cons, err := queue.EnsureConsumer(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := js.PublishMsg(ctx, queue.NewScheduleMsg(cfg, "d1", start.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	// Moved an hour earlier: the first wake-up must not fire as well.
	due := start.Add(1500 * time.Millisecond)
	if _, err := js.PublishMsg(ctx, queue.NewScheduleMsg(cfg, "d1", due)); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range batch.Messages() {
		got = append(got, m)
		_ = m.Ack()
	}
	if len(got) != 1 {
		t.Fatalf("fired %d work items, want exactly 1", len(got))
	}
	id, err := queue.DeliveryID(got[0])
	if err != nil || id != "d1" {
		t.Fatalf("fired item is delivery %q (%v), want d1", id, err)
	}
	md, _ := got[0].Metadata()
	if md.Timestamp.Before(due.Truncate(time.Millisecond)) {
		t.Errorf("fired at %s, before its due time %s", md.Timestamp, due)
	}
	st, err := js.Stream(ctx, queue.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("stream still holds %d msgs after the wake-up fired and was acked", info.State.Msgs)
	}
}
