package bridge_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/proto"
)

// setDelivery writes delivery:{id} with status, or deletes it when status
// is empty.
func (e *env) setDelivery(t *testing.T, id string, status proto.DeliveryStatus) {
	t.Helper()
	ctx := context.Background()
	if status == "" {
		if err := e.rdb.Del(ctx, "delivery:"+id).Err(); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := json.Marshal(proto.Delivery{DeliveryID: id, SubscriptionID: "sub_1", EventID: "evt_1", Status: status})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Set(ctx, "delivery:"+id, raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// workItem is one message the engine's consumer received.
type workItem struct {
	seq   uint64
	id    string
	msgID string
}

// consumeOne takes the next work item through the engine's durable consumer
// and acks it, as the engine does once a delivery is final; the work-queue
// stream then deletes it.
func (e *env) consumeOne(t *testing.T) workItem {
	t.Helper()
	ctx := testCtx(t)
	cons, err := queue.EnsureConsumer(ctx, e.js, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// A work-queue stream allows one unfiltered consumer; streamIDs needs
	// its own.
	defer e.js.DeleteConsumer(ctx, queue.DefaultStream, queue.DefaultConsumer)
	m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("no work item: %v", err)
	}
	id, err := queue.DeliveryID(m)
	if err != nil {
		t.Fatalf("engine would reject the work item: %v", err)
	}
	md, err := m.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	return workItem{seq: md.Sequence.Stream, id: id, msgID: m.Headers().Get(jetstream.MsgIDHeader)}
}

// settled waits until the bridge has nothing of id left in its lists.
func (e *env) settled(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, "dispatch:pending and the processing list empty", func() bool {
		return e.llen(t, pending) == 0 && e.llen(t, processing) == 0
	})
}

func TestRun_RequeuesAnIDPushedAgainAfterItsMessageWasConsumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const id = "dlv_again"
	e.setDelivery(t, id, proto.DeliveryFailed)
	b := e.newBridge(t, bridge.Config{})
	start(t, b)

	e.lpush(t, pending, []string{id})
	eventually(t, 10*time.Second, "first message", func() bool { return e.streamMsgs(t) == 1 })
	first := e.consumeOne(t)

	// An operator resets the failed delivery and pushes it again, well
	// within the duplicate window.
	e.setDelivery(t, id, proto.DeliveryPending)
	e.lpush(t, pending, []string{id})
	eventually(t, 10*time.Second, "re-enqueued message", func() bool { return e.streamMsgs(t) == 1 })
	e.settled(t)
	if got := e.streamIDs(t); got[id] != 1 || len(got) != 1 {
		t.Fatalf("stream holds %v, want %s once", got, id)
	}
	if s := b.Stats(); s.Requeued != 1 || s.Duplicates != 0 || s.Published != 1 {
		t.Errorf("stats = %+v, want 1 published and 1 requeued", s)
	}

	// Pushed once more while the re-enqueue is still queued: one message.
	e.lpush(t, pending, []string{id})
	e.settled(t)
	eventually(t, 5*time.Second, "duplicate counted", func() bool { return b.Stats().Duplicates == 1 })
	if n := e.streamMsgs(t); n != 1 {
		t.Errorf("stream holds %d msgs, want the one re-enqueue", n)
	}
	second := e.consumeOne(t)
	if second.id != id || second.msgID != queue.RequeueMsgID(id, first.seq) {
		t.Errorf("re-enqueue = %+v, want delivery %s with msg id %s", second, id, queue.RequeueMsgID(id, first.seq))
	}

	// The re-enqueue consumed too, a third push follows the chain to a new
	// msg id instead of stopping at the consumed re-enqueue.
	e.lpush(t, pending, []string{id})
	eventually(t, 10*time.Second, "second re-enqueue", func() bool { return e.streamMsgs(t) == 1 })
	third := e.consumeOne(t)
	if third.id != id || third.msgID != queue.RequeueMsgID(id, second.seq) {
		t.Errorf("second re-enqueue = %+v, want delivery %s with msg id %s", third, id, queue.RequeueMsgID(id, second.seq))
	}
	e.settled(t)
	if s := b.Stats(); s.Requeued != 2 {
		t.Errorf("stats = %+v, want 2 requeued", s)
	}
}

func TestRun_DropsAnIDPushedAgainWhenItsDeliveryNeedsNothingMore(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status proto.DeliveryStatus
	}{
		{"succeeded", proto.DeliverySuccess},
		{"failed", proto.DeliveryFailed},
		{"record gone", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			const id = "dlv_done"
			e.setDelivery(t, id, proto.DeliveryPending)
			b := e.newBridge(t, bridge.Config{})
			start(t, b)
			e.lpush(t, pending, []string{id})
			eventually(t, 10*time.Second, "first message", func() bool { return e.streamMsgs(t) == 1 })
			e.consumeOne(t)

			e.setDelivery(t, id, tc.status)
			e.lpush(t, pending, []string{id})
			e.settled(t)
			eventually(t, 5*time.Second, "duplicate counted", func() bool { return b.Stats().Duplicates == 1 })
			if n := e.streamMsgs(t); n != 0 {
				t.Errorf("stream holds %d msgs, want none for a delivery that is %s", n, tc.name)
			}
			if s := b.Stats(); s.Requeued != 0 {
				t.Errorf("stats = %+v, want nothing requeued", s)
			}
		})
	}
}

func TestRun_CollapsesCrashRecoveryRepublishesWhileTheOriginalIsQueued(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// queued is what a bridge had published before it crashed, leaving
		// the id in its processing list.
		queued func(t *testing.T, e *env, id string)
	}{
		{"original still queued", func(t *testing.T, e *env, id string) {
			e.publishDirect(t, []string{id})
		}},
		{"re-enqueue still queued", func(t *testing.T, e *env, id string) {
			e.publishDirect(t, []string{id})
			consumed := e.consumeOne(t)
			if _, err := e.js.PublishMsg(testCtx(t), queue.NewRequeueMsg(queue.DefaultSubject, id, consumed.seq)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			const id = "dlv_crash"
			e.setDelivery(t, id, proto.DeliveryPending)
			tc.queued(t, e, id)
			e.lpush(t, processing, []string{id})

			b := e.newBridge(t, bridge.Config{})
			start(t, b)
			e.settled(t)
			eventually(t, 5*time.Second, "duplicate counted", func() bool { return b.Stats().Duplicates == 1 })
			if got := e.streamIDs(t); got[id] != 1 || len(got) != 1 {
				t.Errorf("stream holds %v, want %s once", got, id)
			}
			if s := b.Stats(); s.Requeued != 0 || s.Published != 0 || s.Recovered != 1 {
				t.Errorf("stats = %+v, want 1 recovered duplicate and nothing published", s)
			}
		})
	}
}

func TestRun_KeepsAPushedAgainIDWhileItsRecordCannotBeReadAndRequeuesItLater(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	const id = "dlv_noread"
	e.setDelivery(t, id, proto.DeliveryPending)
	e.publishDirect(t, []string{id})
	e.consumeOne(t)

	// The bridge's Redis user may do everything but GET, so the record
	// check fails with a real Redis error.
	if err := e.rdb.Do(ctx, "ACL", "SETUSER", "bridge", "on", ">bridge-pw", "~*", "&*", "+@all", "-get").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.redis.Server.Addr(), Username: "bridge", Password: "bridge-pw"})
	t.Cleanup(func() { rdb.Close() })
	b, err := bridge.New(rdb, e.js, bridge.Config{InstanceID: "test-bridge"})
	if err != nil {
		t.Fatal(err)
	}
	start(t, b)
	e.lpush(t, pending, []string{id})
	eventually(t, 10*time.Second, "bridge stalled on the record check", func() bool { return b.Ready(ctx) != nil && e.llen(t, pending) == 0 })
	if got := e.lrange(t, processing); len(got) != 1 || got[0] != id {
		t.Errorf("processing list = %q while the record is unreadable, want [%s]", got, id)
	}
	if n := e.streamMsgs(t); n != 0 {
		t.Errorf("stream holds %d msgs before the record could be read", n)
	}

	if err := e.rdb.Do(ctx, "ACL", "SETUSER", "bridge", "+get").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "re-enqueued message", func() bool { return e.streamMsgs(t) == 1 })
	e.settled(t)
	if s := b.Stats(); s.Requeued != 1 || s.Duplicates != 0 {
		t.Errorf("stats = %+v, want 1 requeued", s)
	}
}
