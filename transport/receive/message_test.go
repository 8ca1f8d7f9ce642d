package receive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/natsink"
	"github.com/jetrelay/jetrelay/transport/receive"
	"github.com/jetrelay/jetrelay/transport/receive/redisstore"
	"github.com/jetrelay/jetrelay/transport/receive/sqsreceive"
	"github.com/jetrelay/jetrelay/transport/sqs"
)

// sinkRequest is a delivery as the engine hands it to a transport.
func sinkRequest(url, eventID, secret string) *transport.Request {
	return &transport.Request{
		URL: url, Body: []byte(eventBody), EventID: eventID, EventType: "tenant.created",
		Signature: proto.Sign(secret, []byte(eventBody)), TraceID: "0af7651916cd43dd8448eb211c80319c",
		Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", DeliveryID: "del-1", Attempt: 1,
	}
}

func TestVerifyMessage_AcceptsWhatTheNATSSinkSendsAndRefusesAForgery(t *testing.T) {
	_, nc, _ := testenv.NATS(t)
	sub, err := nc.SubscribeSync("orders.events")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := natsink.New(natsink.Config{Conn: nc, ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, secret := range []string{newSecret, "whsec_attacker"} {
		if _, err := tr.Deliver(ctx, sinkRequest("nats:///orders.events", "evt-nats", secret)); err != nil {
			t.Fatal(err)
		}
	}
	v := newVerifier(t)
	good, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.VerifyMessage(receive.NATSMessage(good.Data, good.Header))
	if err != nil || id.EventID != "evt-nats" || id.EventType != "tenant.created" {
		t.Fatalf("genuine NATS message: identity %+v, error %v", id, err)
	}
	forged, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.VerifyMessage(receive.NATSMessage(forged.Data, forged.Header)); !errors.Is(err, receive.ErrBadSignature) {
		t.Fatalf("forged NATS message: error %v, want ErrBadSignature", err)
	}
}

func TestVerifyMessage_AcceptsWhatTheSQSSinkSendsAndDedupesItsRedelivery(t *testing.T) {
	env := testenv.SQS(t)
	creds := credentials.NewStaticCredentialsProvider("test", "test", "")
	client := awssqs.New(awssqs.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(env.Endpoint)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("orders")}); err != nil {
		t.Fatal(err)
	}
	tr, err := sqs.New(ctx, sqs.Config{Endpoint: env.Endpoint, Region: "us-east-1", Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	// The same event twice, as a retry after a lost answer sends it.
	for range 2 {
		if res, err := tr.Deliver(ctx, sinkRequest(env.SubscriptionURL("orders"), "evt-sqs", oldSecret)); err != nil || res.Outcome != transport.Delivered {
			t.Fatalf("sqs deliver: %+v, %v", res, err)
		}
	}
	v := newVerifier(t)
	d := receive.NewDeduper(redisstore.New(sharedRedis, redisstore.WithPrefix("sqs-test:")))
	handled, received := 0, 0
	for received < 2 && ctx.Err() == nil {
		out, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(env.QueueURL("orders")), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			received++
			id, err := v.VerifyMessage(sqsreceive.Message(m))
			if err != nil {
				t.Fatalf("genuine SQS message refused: %v", err)
			}
			if _, err := d.Do(ctx, id.EventID, func(context.Context) error { handled++; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	if received != 2 || handled != 1 {
		t.Fatalf("received %d messages, handled %d; want 2 and 1", received, handled)
	}
}
