package queue_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

func TestEnsure_ReconcilesAStreamAndConsumerThatDriftedAtStartUp(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	// Someone (an operator with the nats CLI, an older jetrelay) changed
	// the topology by hand.
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: queue.DefaultStream, Subjects: []string{queue.DefaultSubject},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
		Discard: jetstream.DiscardOld, MaxMsgs: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, queue.DefaultStream, jetstream.ConsumerConfig{
		Durable: queue.DefaultConsumer, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 5 * time.Second, MaxAckPending: 7, MaxDeliver: 3,
	}); err != nil {
		t.Fatal(err)
	}

	if st, err = queue.EnsureStream(ctx, js, queue.Config{}); err != nil {
		t.Fatalf("EnsureStream: %v", err)
	}
	// The upgrade to a stream that holds waiting work narrows the old
	// unfiltered consumer first, or it would take wake-ups and held
	// deliveries as work items.
	old, err := js.Consumer(ctx, queue.DefaultStream, queue.DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if f := old.CachedInfo().Config.FilterSubject; f != queue.DefaultSubject {
		t.Errorf("after EnsureStream the existing consumer's filter is %q, want %q", f, queue.DefaultSubject)
	}
	cons, err := queue.EnsureConsumer(ctx, js, queue.Config{})
	if err != nil {
		t.Fatalf("EnsureConsumer: %v", err)
	}
	si, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := si.Config; !c.AllowMsgSchedules || c.MaxMsgs != -1 || len(c.Subjects) != 5 {
		t.Errorf("stream not reconciled: schedules=%v max_msgs=%d subjects=%v", c.AllowMsgSchedules, c.MaxMsgs, c.Subjects)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := ci.Config; c.AckWait != queue.DefaultAckWait || c.MaxAckPending != queue.DefaultMaxAckPending || c.MaxDeliver != -1 || c.FilterSubject != queue.DefaultSubject {
		t.Errorf("consumer not reconciled: ack_wait=%s max_ack_pending=%d max_deliver=%d filter=%q", c.AckWait, c.MaxAckPending, c.MaxDeliver, c.FilterSubject)
	}
}

// A line consumer made by a build before memory-backed lines (state on
// file) cannot be changed to memory; replicas of the newer build keep its
// storage and update its other settings instead of failing on the line,
// and a new line is made in memory.
func TestEnsureOrderedConsumer_TakesAFileBackedLineAsItIsAndMakesNewOnesInMemory(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	c := queue.Config{}
	if _, err := queue.EnsureStream(ctx, js, c); err != nil {
		t.Fatal(err)
	}
	older := queue.OrderedConsumerConfig(c, "whsub_older")
	older.MemoryStorage, older.AckWait = false, time.Minute
	if _, err := js.CreateConsumer(ctx, c.WithDefaults().Stream, older); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"whsub_older", "whsub_newer"} {
		if _, err := js.Publish(ctx, c.OrderedSubject(sub), []byte("dlv_"+sub)); err != nil {
			t.Fatal(err)
		}
		cons, err := queue.EnsureOrderedConsumer(ctx, js, c, sub)
		if err != nil {
			t.Fatalf("line of %s: %v", sub, err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := sub == "whsub_newer"; info.Config.MemoryStorage != want {
			t.Errorf("line of %s: memory storage %v, want %v", sub, info.Config.MemoryStorage, want)
		}
		if info.Config.AckWait != queue.OrderedAckWait {
			t.Errorf("line of %s: AckWait %s, want this build's %s", sub, info.Config.AckWait, queue.OrderedAckWait)
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second), jetstream.FetchPriorityGroup(queue.OrderedGroup))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range batch.Messages() {
			got = append(got, string(m.Data()))
		}
		if len(got) != 1 || got[0] != "dlv_"+sub {
			t.Errorf("line of %s handed out %q, want its one item", sub, got)
		}
	}
}
