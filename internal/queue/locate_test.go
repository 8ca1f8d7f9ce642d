package queue_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
)

func TestScanWork_FindsQueuedAndInFlightItemsAndNeverProvesAbsenceBeyondItsLimit(t *testing.T) {
	ctx, js, cons := workQueue(t)
	cfg := queue.Config{}.WithDefaults()
	for _, id := range []string{"del_a", "del_b", "del_c"} {
		if _, err := js.PublishMsg(ctx, queue.NewMsg(cfg.Subject, id)); err != nil {
			t.Fatal(err)
		}
	}
	// One item handed to an engine and not acked: the stream still holds it.
	if _, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cfg.ScanWork(ctx, stream, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Complete || w.Count != 3 || !w.Has("del_a") || !w.Has("del_b") || !w.Has("del_c") || w.Has("del_gone") {
		t.Fatalf("scan = %+v; want all three items (one in flight) and not del_gone", w)
	}
	w, err = cfg.ScanWork(ctx, stream, 2)
	if err != nil {
		t.Fatal(err)
	}
	if w.Complete || !w.Has("del_gone") {
		t.Fatalf("scan over its limit = %+v; want incomplete, claiming every id (never a false absence)", w)
	}

	if _, err := js.PublishMsg(ctx, queue.NewScheduleMsg(cfg, "del_x", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, queue.NewHeldMsg(cfg, "whsub_1", "del_y", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"del_x": cfg.ScheduleSubject("del_x"), "del_y": cfg.HeldSubject("whsub_1", "del_y"), "del_a": ""} {
		p, err := cfg.FindWaiting(ctx, stream, "whsub_1", id)
		if err != nil || p.Subject != want || p.Held != (id == "del_y") {
			t.Errorf("FindWaiting(%s) = %+v, %v; want subject %q", id, p, err, want)
		}
	}
}
