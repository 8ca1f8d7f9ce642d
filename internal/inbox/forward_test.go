package inbox_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/inbox"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

func TestInbox_ForwardsToANATSSubjectWithTheIdentityAsHeaders(t *testing.T) {
	pg := database(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := natsserver.Start(ctx, natsserver.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := ns.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.cycles"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	core, err := nc.SubscribeSync("audit.cycles")
	if err != nil {
		t.Fatal(err)
	}

	body := `{"event_id":"evt-nats","n":1.50}`
	for _, subject := range []string{"orders.cycles", "audit.cycles"} { // a stream's subject, then a core one
		// Each inbox runs in its own subtest, so it has stopped before the
		// next one starts: both share one database, and a forwarder still
		// running would take the next inbox's event for its own subject
		// (seen once: evt-audit.cycles on orders.cycles).
		ok := t.Run(subject, func(t *testing.T) {
			s := startInbox(t, inbox.Config{Listen: "127.0.0.1:0", PostgresURL: pg.URL, Secrets: []string{secret},
				Forward: ns.ClientURL() + "/" + subject})
			if code := post(t, s.Addr(), secret, "evt-"+subject, body); code != http.StatusAccepted {
				t.Fatalf("intake answered %d", code)
			}
			await(t, "the event is forwarded to "+subject, func() bool { return status(t, s, "evt-"+subject) == inbox.StatusDone })
		})
		if !ok {
			return
		}
	}

	v, _ := receive.NewVerifier([]string{secret})
	msg, err := stream.GetLastMsgForSubject(ctx, "orders.cycles")
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.VerifyMessage(receive.NATSMessage(msg.Data, msg.Header))
	if err != nil || id.EventID != "evt-orders.cycles" || !bytes.Equal(msg.Data, []byte(body)) || msg.Header.Get(jetstream.MsgIDHeader) != id.EventID {
		t.Fatalf("stream copy: identity %+v, err %v, body %q, msg id %q", id, err, msg.Data, msg.Header.Get(jetstream.MsgIDHeader))
	}
	m, err := core.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := v.VerifyMessage(receive.NATSMessage(m.Data, m.Header)); err != nil || id.EventID != "evt-audit.cycles" || m.Header.Get(proto.HeaderEventType) != "tenant.created" {
		t.Fatalf("core subscriber got identity %+v, err %v", id, err)
	}
}
