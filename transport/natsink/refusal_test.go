package natsink_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/transporttest"
)

func TestDeliver_AFullStreamIsAnAnswerWithItsOwnReasonNotANoAnswer(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FULL", Subjects: []string{"full.events"},
		MaxMsgs: 1, Discard: jetstream.DiscardNew}); err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t, nc)
	if res, err := tr.Deliver(ctx, transporttest.NewRequest("nats:///full.events", "first")); err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("first delivery into an empty stream = %+v, %v; want delivered", res, err)
	}
	res, err := tr.Deliver(ctx, transporttest.NewRequest("nats:///full.events", "second"))
	if err != nil {
		t.Fatalf("Deliver into a full stream returned error %v; want an answer (the server refused)", err)
	}
	if res.Outcome != transport.Throttled || res.Reason != "nats_stream_full" || !transport.ValidReason(res.Reason) {
		t.Errorf("Deliver into a full stream = %+v; want Throttled with Reason nats_stream_full", res)
	}
	if res.StatusCode != 503 || !strings.Contains(res.Message, "maximum messages exceeded") {
		t.Errorf("the record would keep response_status %d, error_message %q; want JetStream's 503 and its description", res.StatusCode, res.Message)
	}
}

func TestDeliver_AMessageOverTheStreamsSizeLimitIsRefusedAsTooLarge(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small.events"}, MaxMsgSize: 16}); err != nil {
		t.Fatal(err)
	}
	res, err := newTransport(t, nc).Deliver(ctx, transporttest.NewRequest("nats:///small.events", "big"))
	if err != nil || res.Outcome != transport.Failed || res.Reason != "nats_message_too_large" {
		t.Errorf("Deliver of a message over MaxMsgSize = %+v, %v; want Failed with Reason nats_message_too_large", res, err)
	}
}
