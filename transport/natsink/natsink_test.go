package natsink_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/natsink"
	"github.com/jetrelay/jetrelay/transport/transporttest"
)

func TestNatsink_PassesTheTransportConformanceSuite(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	var n int
	var mu sync.Mutex
	next := func() int { mu.Lock(); defer mu.Unlock(); n++; return n }
	transporttest.Run(t, transporttest.Harness{
		Transport: func(t *testing.T) transport.Transport { return newTransport(t, nc) },
		Destination: func(t *testing.T, b transporttest.Behaviour) (transporttest.Destination, bool) {
			return destination(t, js, b, next())
		},
		Malformed: []string{
			"nats:///", "nats://host:4222/", "nats:///orders.*", "nats:///orders.>", "nats:///a..b",
			"nats://user:s3cret@/orders", "nats:///orders?x=1", "nats:///has%20space",
		},
		CustomHeaders: true,
		Unreachable: func(t *testing.T, user, password string) (string, bool) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			return "nats://" + user + ":" + password + "@" + addr + "/orders.created", true
		},
		// Destinations are nats:///subject on the engine's connection: no
		// dial of its own (ssrf_test.go covers servers named in URLs).
	})
}

func newTransport(t *testing.T, nc *nats.Conn) *natsink.Transport {
	t.Helper()
	tr, err := natsink.New(natsink.Config{Conn: nc, ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// destination sets up a real JetStream stream (or a silent TCP listener for
// Hang) behaving as b.
func destination(t *testing.T, js jetstream.JetStream, b transporttest.Behaviour, n int) (transporttest.Destination, bool) {
	ctx := context.Background()
	subject := "dest." + strings.Repeat("x", n%3+1) + "." + time.Now().Format("150405.000000000")
	subject = strings.ReplaceAll(subject, ".0", ".n0")
	cfg := jetstream.StreamConfig{Name: "DEST_" + strings.NewReplacer(".", "_").Replace(subject), Subjects: []string{subject}, Storage: jetstream.MemoryStorage}
	switch b {
	case transporttest.Hang:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		var mu sync.Mutex
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c) // held open, never spoken to
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
		})
		return transporttest.Destination{URL: "nats://" + ln.Addr().String() + "/silent", Received: func() []transporttest.Message { return nil }}, true
	case transporttest.Reject:
		cfg.MaxMsgSize = 8 // every event is too large: a JetStream error answer
	case transporttest.Throttle:
		cfg.MaxMsgs, cfg.Discard = 1, jetstream.DiscardNew
	}
	stream, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b == transporttest.Throttle {
		if _, err := js.Publish(ctx, subject, []byte("filler")); err != nil {
			t.Fatal(err)
		}
	}
	return transporttest.Destination{URL: "nats:///" + subject, Received: func() []transporttest.Message {
		return read(t, stream)
	}}, true
}

// read returns what a consumer of the stream sees, headers as it reads them.
func read(t *testing.T, stream jetstream.Stream) []transporttest.Message {
	ctx := context.Background()
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []transporttest.Message
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		out = append(out, toMessage(m.Data, m.Header))
	}
	return out
}

func toMessage(data []byte, h nats.Header) transporttest.Message {
	get := func(k string) string {
		if v := h[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	m := transporttest.Message{Body: data, EventID: get(proto.HeaderEventID), EventType: get(proto.HeaderEventType),
		Signature: get(proto.HeaderSignature), TraceID: get(proto.HeaderTraceID), Traceparent: get(proto.HeaderTraceparent),
		RequestID: get(proto.HeaderRequestID), Headers: map[string]string{}}
	for k := range h {
		m.Headers[k] = get(k)
	}
	return m
}

func TestDeliver_JetStreamDropsAResendOfTheSameEvent(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.events"}})
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t, nc)
	req := transporttest.NewRequest("nats:///orders.events", "dedup")
	for attempt := 1; attempt <= 2; attempt++ {
		req.Attempt = attempt
		if res, err := tr.Deliver(ctx, req); err != nil || res.Outcome != transport.Delivered {
			t.Fatalf("attempt %d: %+v, %v", attempt, res, err)
		}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages after a resend, want 1 (Nats-Msg-Id dedup)", info.State.Msgs)
	}
	m, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get(jetstream.MsgIDHeader); got != req.EventID {
		t.Errorf("Nats-Msg-Id = %q, want the event id %q", got, req.EventID)
	}
}

func TestDeliver_CorePublishWithoutAStreamReachesASubscriber(t *testing.T) {
	_, nc, _ := testenv.NATS(t)
	sub, err := nc.SubscribeSync("plain.events")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := transporttest.NewRequest("nats:///plain.events", "core")
	if res, err := tr.Deliver(ctx, req); err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
	m, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := toMessage(m.Data, m.Header)
	if got.EventID != req.EventID || got.Signature != req.Signature || got.Traceparent != req.Traceparent {
		t.Errorf("subscriber saw %+v", got)
	}
}

func TestDeliver_PublishesToTheServerTheURLNames(t *testing.T) {
	other, err := natsserverWithListener(t)
	if err != nil {
		t.Fatal(err)
	}
	onc, err := nats.Connect(other)
	if err != nil {
		t.Fatal(err)
	}
	defer onc.Close()
	sub, err := onc.SubscribeSync("elsewhere.events")
	if err != nil {
		t.Fatal(err)
	}
	if err := onc.Flush(); err != nil {
		t.Fatal(err)
	}
	tr, err := natsink.New(natsink.Config{}) // no engine connection at all
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := transporttest.NewRequest(other+"/elsewhere.events", "remote")
	if res, err := tr.Deliver(ctx, req); err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
	if m, err := sub.NextMsgWithContext(ctx); err != nil || m.Header.Get(proto.HeaderEventID) != req.EventID {
		t.Fatalf("the named server's subscriber got %v, %v", m, err)
	}
	if _, err := tr.Deliver(ctx, transporttest.NewRequest("nats:///engine.only", "x")); err == nil {
		t.Error("nats:///subject without an engine connection must fail")
	}
}

// natsserverWithListener starts a second NATS server on a loopback port and
// returns its client URL.
func natsserverWithListener(t *testing.T) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: t.TempDir(), Listen: addr})
	if err != nil {
		return "", err
	}
	t.Cleanup(srv.Shutdown)
	return srv.ClientURL(), nil
}
