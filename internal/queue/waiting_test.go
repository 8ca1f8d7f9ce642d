package queue_test

import (
	"context"

	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// workQueue starts a JetStream server with the default dispatch stream and
// its work consumer; the context ends with the test.
func workQueue(t *testing.T) (context.Context, jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	_, _, js := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if _, err := queue.EnsureStream(ctx, js, queue.Config{}); err != nil {
		t.Fatal(err)
	}
	cons, err := queue.EnsureConsumer(ctx, js, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, js, cons
}

func TestScheduleMsg_FiresOnceIntoTheWorkSubjectAndARescheduleReplacesIt(t *testing.T) {
	ctx, js, cons := workQueue(t)
	cfg := queue.Config{}
	// The meters that count waiting work exist (metrics are scraped): they
	// must not keep a fired wake-up alive.
	if _, err := queue.CountWaiting(ctx, js, cfg); err != nil {
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
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("stream still holds %d msgs after the wake-up fired and was acked", info.State.Msgs)
	}
	if w, err := queue.CountWaiting(ctx, js, cfg); err != nil || w.Scheduled != 0 {
		t.Errorf("CountWaiting after the wake-up fired = %+v, %v; want nothing scheduled", w, err)
	}
}

func TestCountWaiting_CountsWakeUpsAndHeldDeliveriesWithoutListingThem(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	cfg := queue.Config{}
	if _, err := queue.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.EnsureConsumer(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	far := time.Now().Add(time.Hour)
	msgs := []*nats.Msg{
		queue.NewScheduleMsg(cfg, "d1", far),
		queue.NewScheduleMsg(cfg, "d2", far),
		queue.NewScheduleMsg(cfg, "d2", far.Add(time.Minute)), // replaces d2's wake-up
		queue.NewHeldCheckMsg(cfg, "sub1", far),
		queue.NewHeldMsg(cfg, "sub1", "h1", far),
		queue.NewHeldMsg(cfg, "sub1", "h2", far),
		queue.NewHeldMsg(cfg, "sub2", "h3", far),
		queue.NewMsg("jetrelay.dispatch", "w1"), // a work item: neither
	}
	for _, m := range msgs {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish %s: %v", m.Subject, err)
		}
	}
	w, err := queue.CountWaiting(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.Scheduled != 3 || w.Held != 3 {
		t.Errorf("CountWaiting = %+v, want 3 scheduled (d1, d2, sub1's check) and 3 held", w)
	}
	if ok, err := queue.IsHeld(ctx, js, cfg, "sub1", "h2"); err != nil || !ok {
		t.Errorf("IsHeld(sub1, h2) = %v, %v; want true", ok, err)
	}
	if ok, err := queue.IsScheduled(ctx, js, cfg, "w1"); err != nil || ok {
		t.Errorf("IsScheduled(w1) = %v, %v; want false (a work item, not a wake-up)", ok, err)
	}
	// Counting again reuses the meters and sees a wake-up go.
	st, err := js.Stream(ctx, queue.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(cfg.ScheduleSubject("d1"))); err != nil {
		t.Fatal(err)
	}
	if w, err := queue.CountWaiting(ctx, js, cfg); err != nil || w.Scheduled != 2 {
		t.Errorf("after cancelling d1's wake-up CountWaiting = %+v, %v; want 2 scheduled", w, err)
	}
}

func TestScheduleMsg_FiredItemKeepsItsWaitsCountAndAnUnreadableCountIsZero(t *testing.T) {
	ctx, js, cons := workQueue(t)
	cfg := queue.Config{}
	now := time.Now()
	for id, waits := range map[string]string{"counted": "7", "garbled": "seven"} {
		m := queue.NewScheduleMsg(cfg, id, now.Add(300*time.Millisecond))
		m.Header.Set(queue.WaitsHeader, waits)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for m := range batch.Messages() {
		got[string(m.Data())] = queue.Waits(m)
		_ = m.Ack()
	}
	if len(got) != 2 || got["counted"] != 7 || got["garbled"] != 0 {
		t.Errorf("fired items' waits = %v; want counted 7 (kept by the server) and garbled 0", got)
	}
}
