package queue_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestWithDefaults_FillsOnlyZeroFields(t *testing.T) {
	got := queue.Config{}.WithDefaults()
	want := queue.Config{
		Stream: "JETRELAY_DISPATCH", Subject: "jetrelay.dispatch", Consumer: "jetrelay-engine",
		Replicas: 1, Duplicates: 2 * time.Minute, MaxMsgs: -1, MaxBytes: -1,
		AckWait: 60 * time.Second, MaxAckPending: 10000, MaxDeliver: -1,
	}
	if got != want {
		t.Errorf("defaults = %+v\nwant       %+v", got, want)
	}
	custom := queue.Config{Stream: "S", Replicas: 3, MaxMsgs: 10, MaxDeliver: 20}
	if got := custom.WithDefaults(); got.Stream != "S" || got.Replicas != 3 || got.MaxMsgs != 10 || got.MaxDeliver != 20 {
		t.Errorf("WithDefaults overwrote explicit settings: %+v", got)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestValidate_RejectsSettingsJetStreamWouldRefuse(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*queue.Config)
		want   string
	}{
		{"wildcard subject", func(c *queue.Config) { c.Subject = "jetrelay.>" }, "literal subject"},
		{"empty subject token", func(c *queue.Config) { c.Subject = "jetrelay..dispatch" }, "literal subject"},
		{"dotted stream name", func(c *queue.Config) { c.Stream = "a.b" }, "stream name"},
		{"consumer with space", func(c *queue.Config) { c.Consumer = "a b" }, "consumer name"},
		{"too many replicas", func(c *queue.Config) { c.Replicas = 7 }, "replicas"},
		{"tiny dedupe window", func(c *queue.Config) { c.Duplicates = time.Millisecond }, "duplicates window"},
		{"negative max msgs", func(c *queue.Config) { c.MaxMsgs = -5 }, "max msgs"},
		{"negative ack wait", func(c *queue.Config) { c.AckWait = -time.Second }, "ack wait"},
		{"negative max ack pending", func(c *queue.Config) { c.MaxAckPending = -1 }, "max ack pending"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := queue.Config{}.WithDefaults()
			tc.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestEnsureStream_CreatesAnUnlimitedFileWorkQueueAndIsIdempotent(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	cfg := queue.Config{MaxMsgs: 2}

	if _, err := queue.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatalf("first EnsureStream: %v", err)
	}
	st, err := queue.EnsureStream(ctx, js, cfg)
	if err != nil {
		t.Fatalf("second EnsureStream: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := info.Config
	want := []string{"jetrelay.dispatch", "jetrelay.dispatch.sched.>", "jetrelay.dispatch.held.>", "jetrelay.dispatch.ordered.>", "jetrelay.dispatch.keep.>"}
	if c.Retention != jetstream.WorkQueuePolicy || c.Storage != jetstream.FileStorage || !c.AllowMsgSchedules ||
		c.Duplicates != 2*time.Minute || !slices.Equal(c.Subjects, want) {
		t.Errorf("stream config = %+v", c)
	}
	if c.MaxMsgs != -1 || c.MaxBytes != -1 || c.MaxAge != 0 {
		t.Errorf("stream limits max_msgs=%d max_bytes=%d max_age=%s, want none: a limit would evict waiting work", c.MaxMsgs, c.MaxBytes, c.MaxAge)
	}
}

func TestRoom_CountsOnlyWorkItemsAgainstMaxMsgsAndNeverEvictsWaitingWork(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	cfg := queue.Config{MaxMsgs: 2}
	if _, err := queue.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	// Waiting work (a held delivery, a wake-up far ahead) does not use room.
	if _, err := js.PublishMsg(ctx, queue.NewHeldMsg(cfg, "sub1", "h1", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, queue.NewScheduleMsg(cfg, "s1", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if room, err := queue.Room(ctx, js, cfg); err != nil || room != 2 {
		t.Fatalf("Room with only waiting work = %d, %v; want 2", room, err)
	}
	for _, id := range []string{"d1", "d2", "d3"} {
		if _, err := js.PublishMsg(ctx, queue.NewMsg("jetrelay.dispatch", id)); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
	if room, err := queue.Room(ctx, js, cfg); err != nil || room != 0 {
		t.Fatalf("Room over the cap = %d, %v; want 0", room, err)
	}
	st, err := js.Stream(ctx, queue.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Info(ctx); info.State.Msgs != 5 {
		t.Errorf("stream holds %d msgs, want all 5 kept (3 work items, 1 held, 1 scheduled)", info.State.Msgs)
	}
	if room, err := queue.Room(ctx, js, queue.Config{}); err != nil || room != queue.Unlimited {
		t.Errorf("Room without limits = %d, %v; want Unlimited", room, err)
	}
}

func TestEnsureConsumer_SharesOneDurableWithoutBackOff(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	if _, err := queue.EnsureStream(ctx, js, queue.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.EnsureConsumer(ctx, js, queue.Config{}); err != nil {
		t.Fatalf("first EnsureConsumer: %v", err)
	}
	cons, err := queue.EnsureConsumer(ctx, js, queue.Config{})
	if err != nil {
		t.Fatalf("second EnsureConsumer: %v", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := info.Config
	if c.Durable != "jetrelay-engine" || c.AckPolicy != jetstream.AckExplicitPolicy || len(c.BackOff) != 0 ||
		c.AckWait != 60*time.Second || c.MaxAckPending != 10000 || c.MaxDeliver != -1 {
		t.Errorf("consumer config = %+v", c)
	}
}

func TestEnsureStream_RejectsInvalidConfigBeforeTouchingTheServer(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	_, err := queue.EnsureStream(ctx, js, queue.Config{Subject: "jetrelay.*"})
	if err == nil || !strings.Contains(err.Error(), "literal subject") {
		t.Fatalf("EnsureStream = %v, want a subject error", err)
	}
	if _, err := js.Stream(ctx, queue.DefaultStream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream lookup = %v, want not found", err)
	}
}

func TestNewMsg_RepublishingAnIdStoresItOnceAndDecodesBack(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	cfg := queue.Config{}.WithDefaults()
	st, err := queue.EnsureStream(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ack, err := js.PublishMsg(ctx, queue.NewMsg(cfg.Subject, "dlv_abc"))
		if err != nil {
			t.Fatal(err)
		}
		if ack.Duplicate != (i > 0) {
			t.Errorf("publish %d: duplicate = %v", i, ack.Duplicate)
		}
	}
	cons, err := queue.EnsureConsumer(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	id, err := queue.DeliveryID(m)
	if err != nil || id != "dlv_abc" {
		t.Errorf("DeliveryID = %q, %v; want dlv_abc", id, err)
	}
	if info, _ := st.Info(ctx); info.State.Msgs != 1 {
		t.Errorf("stream holds %d msgs, want 1", info.State.Msgs)
	}
}

func TestDeliveryID_RejectsMalformedWorkItems(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	cfg := queue.Config{}.WithDefaults()
	if _, err := queue.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	cons, err := queue.EnsureConsumer(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		msg  *nats.Msg
	}{
		{"empty body", &nats.Msg{Data: nil}},
		{"too long", &nats.Msg{Data: []byte(strings.Repeat("x", queue.MaxDeliveryIDLen+1))}},
		{"space inside", &nats.Msg{Data: []byte("dlv 1")}},
		{"trailing newline", &nats.Msg{Data: []byte("dlv_1\n")}},
		{"control char", &nats.Msg{Data: []byte("dlv\x00_1")}},
		{"invalid utf-8", &nats.Msg{Data: []byte("dlv_\xff")}},
		{"header disagrees", &nats.Msg{Data: []byte("dlv_1"), Header: nats.Header{jetstream.MsgIDHeader: []string{"dlv_2"}}}},
		{"header requeues another id", &nats.Msg{Data: []byte("dlv_1"), Header: nats.Header{jetstream.MsgIDHeader: []string{queue.RequeueMsgID("dlv_2", 7)}}}},
		{"header requeues a longer id", &nats.Msg{Data: []byte("dlv_1"), Header: nats.Header{jetstream.MsgIDHeader: []string{"dlv_12#r7"}}}},
		{"header suffix not a sequence", &nats.Msg{Data: []byte("dlv_1"), Header: nats.Header{jetstream.MsgIDHeader: []string{"dlv_1#rx"}}}},
		{"header suffix empty", &nats.Msg{Data: []byte("dlv_1"), Header: nats.Header{jetstream.MsgIDHeader: []string{"dlv_1#r"}}}},
		{"header suffix signed", &nats.Msg{Data: []byte("dlv_1"), Header: nats.Header{jetstream.MsgIDHeader: []string{"dlv_1#r+7"}}}},
		{"header suffix padded", &nats.Msg{Data: []byte("dlv_1"), Header: nats.Header{jetstream.MsgIDHeader: []string{"dlv_1#r07"}}}},
		{"header suffix trailing", &nats.Msg{Data: []byte("dlv_1"), Header: nats.Header{jetstream.MsgIDHeader: []string{"dlv_1#r7#r8"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.msg.Subject = cfg.Subject
			if _, err := js.PublishMsg(ctx, tc.msg); err != nil {
				t.Fatal(err)
			}
			m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Ack()
			if id, err := queue.DeliveryID(m); !errors.Is(err, queue.ErrInvalidDeliveryID) {
				t.Errorf("DeliveryID = %q, %v; want ErrInvalidDeliveryID", id, err)
			}
		})
	}
}

func TestNewRequeueMsg_StoresAnIDAgainAfterItsMessageWasConsumedAndDecodesBack(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := testCtx(t)
	cfg := queue.Config{}.WithDefaults()
	st, err := queue.EnsureStream(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := queue.EnsureConsumer(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A delivery id may itself contain the separator; the header is checked
	// against the body, so it still decodes to the whole id.
	for _, id := range []string{"dlv_abc", "dlv#r12"} {
		first, err := js.PublishMsg(ctx, queue.NewMsg(cfg.Subject, id))
		if err != nil {
			t.Fatal(err)
		}
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		again, err := js.PublishMsg(ctx, queue.NewMsg(cfg.Subject, id))
		if err != nil || !again.Duplicate {
			t.Fatalf("republishing %s after its ack: %+v, %v; want a duplicate", id, again, err)
		}
		for i := range 2 {
			ack, err := js.PublishMsg(ctx, queue.NewRequeueMsg(cfg.Subject, id, first.Sequence))
			if err != nil {
				t.Fatal(err)
			}
			if ack.Duplicate != (i > 0) {
				t.Errorf("requeue %d of %s: duplicate = %v, want only the second absorbed", i, id, ack.Duplicate)
			}
		}
		m, err = cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if hdr, want := m.Headers().Get(jetstream.MsgIDHeader), queue.RequeueMsgID(id, first.Sequence); hdr != want {
			t.Errorf("Nats-Msg-Id = %q, want %q", hdr, want)
		}
		if got, err := queue.DeliveryID(m); err != nil || got != id {
			t.Errorf("DeliveryID = %q, %v; want %s", got, err, id)
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if info, _ := st.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("stream holds %d msgs after both were acked, want 0", info.State.Msgs)
	}
}

func TestValidateDeliveryID_AcceptsRealIDsUpToTheLimit(t *testing.T) {
	for _, id := range []string{"dlv_0123456789abcdef", "550e8400-e29b-41d4-a716-446655440000", strings.Repeat("a", queue.MaxDeliveryIDLen), "dlv_ü"} {
		if err := queue.ValidateDeliveryID(id); err != nil {
			t.Errorf("ValidateDeliveryID(%q) = %v", id, err)
		}
	}
}
