package sqs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/sqs"
	"github.com/jetrelay/jetrelay/transport/transporttest"
)

var testCreds = credentials.NewStaticCredentialsProvider("AKIDTEST", "secret-not-logged", "")

// sqsClient is a consumer's client for the fauxqs server.
func sqsClient(env *testenv.SQSEnv) *awssqs.Client {
	return awssqs.New(awssqs.Options{Region: "us-east-1", Credentials: testCreds, BaseEndpoint: aws.String(env.Endpoint)})
}

func createQueue(t *testing.T, c *awssqs.Client, name string) {
	t.Helper()
	in := &awssqs.CreateQueueInput{QueueName: aws.String(name)}
	if strings.HasSuffix(name, ".fifo") {
		in.Attributes = map[string]string{"FifoQueue": "true"}
	}
	if _, err := c.CreateQueue(context.Background(), in); err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
}

// behavingProxy stands in front of fauxqs: requests for queues named
// throttle-* get SQS's throttling answer, hang-* never get one; the rest
// reach fauxqs.
func behavingProxy(t *testing.T, env *testenv.SQSEnv) string {
	target, _ := url.Parse(env.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte("/throttle-")):
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Rate exceeded"}`))
		case bytes.Contains(body, []byte("/hang-")):
			<-r.Context().Done()
		default:
			r.Body = io.NopCloser(bytes.NewReader(body))
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func newTransport(t *testing.T, endpoint string) *sqs.Transport {
	t.Helper()
	tr, err := sqs.New(context.Background(), sqs.Config{Endpoint: endpoint, Region: "us-east-1", Credentials: testCreds})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestSQS_PassesTheTransportConformanceSuite(t *testing.T) {
	env := testenv.SQS(t)
	client := sqsClient(env)
	proxy := behavingProxy(t, env)
	var n atomic.Int32
	transporttest.Run(t, transporttest.Harness{
		Transport: func(t *testing.T) transport.Transport { return newTransport(t, proxy) },
		Destination: func(t *testing.T, b transporttest.Behaviour) (transporttest.Destination, bool) {
			name := fmt.Sprintf("%s-%d", b, n.Add(1))
			switch b {
			case transporttest.Accept:
				createQueue(t, client, name)
			case transporttest.Reject:
				name = "missing-" + name // no such queue: SQS answers QueueDoesNotExist
			}
			return transporttest.Destination{URL: env.SubscriptionURL(name), Received: receiver(t, client, env.QueueURL(name))}, true
		},
		Malformed: []string{
			"sqs://", "sqs://host/", "sqs://host/123/", "sqs://host/123/q/extra", "sqs://key:s3cret@host/123/q",
			"sqs://host/123/q?x=1", "sqs://host/123/bad%20name",
		},
		CustomHeaders: true,
	})
}

// receiver drains the queue as a consumer would, keeping what it read.
func receiver(t *testing.T, c *awssqs.Client, queueURL string) func() []transporttest.Message {
	var mu sync.Mutex
	var got []transporttest.Message
	return func() []transporttest.Message {
		mu.Lock()
		defer mu.Unlock()
		for {
			out, err := c.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
				QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"},
			})
			if err != nil || len(out.Messages) == 0 {
				return append([]transporttest.Message(nil), got...)
			}
			for _, m := range out.Messages {
				attr := func(k string) string {
					if v, ok := m.MessageAttributes[k]; ok && v.StringValue != nil {
						return *v.StringValue
					}
					return ""
				}
				msg := transporttest.Message{Body: []byte(aws.ToString(m.Body)), EventID: attr(proto.HeaderEventID),
					EventType: attr(proto.HeaderEventType), Signature: attr(proto.HeaderSignature), TraceID: attr(proto.HeaderTraceID),
					Traceparent: attr(proto.HeaderTraceparent), RequestID: attr(proto.HeaderRequestID), Headers: map[string]string{}}
				for k := range m.MessageAttributes {
					msg.Headers[k] = attr(k)
				}
				got = append(got, msg)
			}
		}
	}
}

func TestDeliver_FIFOQueueDropsAResendAndGroupsBySubscription(t *testing.T) {
	env := testenv.SQS(t)
	client := sqsClient(env)
	createQueue(t, client, "orders.fifo")
	tr := newTransport(t, env.Endpoint)
	req := transporttest.NewRequest(env.SubscriptionURL("orders.fifo"), "fifo")
	for attempt := 1; attempt <= 2; attempt++ {
		req.Attempt = attempt
		if res, err := tr.Deliver(context.Background(), req); err != nil || res.Outcome != transport.Delivered {
			t.Fatalf("attempt %d: %+v, %v", attempt, res, err)
		}
	}
	out, err := client.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{
		QueueUrl: aws.String(env.QueueURL("orders.fifo")), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("FIFO queue holds %d messages after a resend, want 1 (deduplication id = event id)", len(out.Messages))
	}
	a := out.Messages[0].Attributes
	if a["MessageGroupId"] != req.SubscriptionID || a["MessageDeduplicationId"] != req.EventID {
		t.Errorf("group %q dedup %q; want the subscription id %q and the event id %q", a["MessageGroupId"], a["MessageDeduplicationId"], req.SubscriptionID, req.EventID)
	}
}
