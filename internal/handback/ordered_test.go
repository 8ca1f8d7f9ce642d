package handback_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/handback"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
)

func TestRun_HandsAnOrderedLineBackInItsOrder(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	line := []string{"del_line0000000001", "del_line0000000002", "del_line0000000003"}
	for _, id := range line {
		w.publish(t, queue.NewMsg(w.qc.OrderedSubject("whsub_ordered00001"), id))
	}
	// The line's consumer, as an engine left it (pending and pinning
	// state of its own): handback removes it with the shared one.
	if _, err := queue.EnsureOrderedConsumer(ctx, w.js, w.qc, "whsub_ordered00001"); err != nil {
		t.Fatal(err)
	}

	rep, err := handback.Run(ctx, w.rdb, w.js, handback.Config{Queue: w.qc})
	if err != nil {
		t.Fatal(err)
	}
	// LPUSHed oldest first, as admin enqueues: the reference takes them
	// from the right, in the line's order.
	got, err := w.rdb.LRange(ctx, store.PendingList, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(got)
	if !slices.Equal(got, line) {
		t.Errorf("dispatch:pending from the right = %v, want the line in order %v", got, line)
	}
	if n := w.streamMsgs(t); n != 0 || rep.Removed != len(line) {
		t.Errorf("%d messages left in the stream, %d removed; want the whole line handed back", n, rep.Removed)
	}
	if _, err := w.js.Consumer(ctx, w.qc.Stream, w.qc.OrderedConsumerName("whsub_ordered00001")); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("the line's consumer is still there after handback (err %v)", err)
	}
}
