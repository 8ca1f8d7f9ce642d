package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// subscribe creates a subscription with `jetrelay subscriptions create` on
// the bed's Redis and key, returning its id and the secret it printed.
func (b *bed) subscribe(t *testing.T, args ...string) (id, secret string) {
	t.Helper()
	env := map[string]string{"REDIS_URL": b.redis.Server.URL(), "WEBHOOK_SECRET_ENCRYPTION_KEY": b.keyB64}
	code, out := runBinary(t, env, 15*time.Second, append([]string{"subscriptions", "create"}, args...)...)
	if code != 0 {
		t.Fatalf("jetrelay subscriptions create exited %d:\n%s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "subscription_id: "); ok {
			id = v
		}
		if v, ok := strings.CutPrefix(line, "signing_secret: "); ok {
			secret = v
		}
	}
	if id == "" || secret == "" {
		t.Fatalf("subscriptions create printed no id or secret:\n%s", out)
	}
	if want := "redis: " + b.redis.Server.Addr() + " db 0"; !strings.Contains(out, want) {
		t.Errorf("subscriptions create does not say which Redis it wrote to (%q):\n%s", want, out)
	}
	return id, secret
}

// awaitAttempts polls until the delivery has been attempted at least n
// times without succeeding.
func (b *bed) awaitAttempts(t *testing.T, id string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec, err := b.store.Delivery(context.Background(), id)
		if err == nil && rec.Status == proto.DeliverySuccess {
			t.Fatalf("delivery succeeded while the destination was refusing: %s", rec.Raw)
		}
		if err == nil && rec.Attempts >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s not attempted %d times within %s (last: %v %v)", id, n, within, rec, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// resend enqueues the event again for the subscription under a new
// delivery id, as cycles-server's runtime writes deliveries, so the engine
// sends the same event a second time.
func (b *bed) resend(t *testing.T, eventID, subID string) string {
	t.Helper()
	id, err := b.writer.EnqueueRuntimeStyle(context.Background(), admin.Delivery{SubscriptionID: subID, EventID: eventID, EventType: "budget.exhausted"})
	if err != nil {
		t.Fatalf("resend: %v", err)
	}
	return id
}

// received is what a consumer of a queue or stream saw, by header name.
type received struct {
	body    []byte
	headers map[string]string
}

// checkIdentity asserts what every transport carries: the event id, a
// signature the subscription's secret verifies, and the delivery's trace.
func checkIdentity(t *testing.T, m received, ev admin.Event, eventID, secret string) {
	t.Helper()
	if got := m.headers[proto.HeaderEventID]; got != eventID {
		t.Errorf("%s = %q, want the event id %q", proto.HeaderEventID, got, eventID)
	}
	if got := m.headers[proto.HeaderEventType]; got != ev.EventType {
		t.Errorf("%s = %q, want %q", proto.HeaderEventType, got, ev.EventType)
	}
	if sig := m.headers[proto.HeaderSignature]; !proto.Verify(secret, m.body, sig) {
		t.Errorf("signature %q does not verify with the subscription's secret over the body %s", sig, m.body)
	}
	if got := m.headers[proto.HeaderTraceID]; got != ev.TraceID {
		t.Errorf("%s = %q, want the event's trace id %q", proto.HeaderTraceID, got, ev.TraceID)
	}
	tp, err := proto.ParseTraceparent(m.headers[proto.HeaderTraceparent])
	if err != nil {
		t.Errorf("traceparent %q: %v", m.headers[proto.HeaderTraceparent], err)
	} else if hex.EncodeToString(tp.TraceID[:]) != ev.TraceID {
		t.Errorf("traceparent %s does not continue the event's trace %s", m.headers[proto.HeaderTraceparent], ev.TraceID)
	}
	if !strings.Contains(string(m.body), eventID) {
		t.Errorf("body %s is not the stored event %s", m.body, eventID)
	}
}

func TestRun_NATSSubscriptionGetsSignedTracedDeduplicatedMessagesAndRetriesUntilTheStreamHasRoom(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := nats.Connect(b.nats.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A full stream that refuses new messages (503): the sink is throttled.
	cfg := jetstream.StreamConfig{Name: "SINK", Subjects: []string{"sink.events"}, MaxMsgs: 1, Discard: jetstream.DiscardNew, Duplicates: time.Minute}
	stream, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "sink.events", []byte("filler")); err != nil {
		t.Fatal(err)
	}
	subID, secret := b.subscribe(t, "--tenant", "tenant-proc", "--url", "nats:///sink.events", "--event-types", "budget.exhausted",
		"--max-retries", "10", "--initial-delay-ms", "100", "--backoff-multiplier", "1.0", "--max-delay-ms", "1000")

	startRelay(t, b.env())
	ev := event("budget.exhausted")
	eventID, ids, err := b.writer.Emit(ctx, ev, admin.TraceSnapshot{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("emit: %v %v, want one delivery", ids, err)
	}
	b.awaitAttempts(t, ids[0], 2, 15*time.Second)

	cfg.MaxMsgs = -1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	b.awaitSuccess(t, ids, 20*time.Second)
	rec, err := b.store.Delivery(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts < 3 {
		t.Errorf("delivery succeeded after %d attempts; want the refused ones counted (at least 3)", rec.Attempts)
	}

	// The same event again under another delivery: JetStream drops it by
	// its Nats-Msg-Id and the engine records the PubAck as a success.
	again := b.resend(t, eventID, subID)
	b.awaitSuccess(t, []string{again}, 20*time.Second)

	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages after a delivery and a resend of one event, want 1", info.State.Msgs)
	}
	m, err := stream.GetMsg(ctx, info.State.FirstSeq)
	if err != nil {
		t.Fatal(err)
	}
	got := received{body: m.Data, headers: map[string]string{}}
	for k, v := range m.Header {
		got.headers[k] = v[0]
	}
	checkIdentity(t, got, ev, eventID, secret)
	if id := got.headers[jetstream.MsgIDHeader]; id != eventID {
		t.Errorf("Nats-Msg-Id = %q, want the event id %q", id, eventID)
	}
}

func TestRun_SQSFIFOSubscriptionGetsSignedTracedDeduplicatedMessagesAndRetriesWhenThrottled(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	env := testenv.SQS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	creds := credentials.NewStaticCredentialsProvider("AKIDTEST", "sqs-secret-not-logged", "")
	client := awssqs.New(awssqs.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(env.Endpoint)})
	if _, err := client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("events.fifo"), Attributes: map[string]string{"FifoQueue": "true"}}); err != nil {
		t.Fatal(err)
	}

	// In front of fauxqs: the first two sends get SQS's throttling answer.
	var sends, throttled atomic.Int64
	target, _ := url.Parse(env.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "AmazonSQS.SendMessage" && sends.Add(1) <= 2 {
			throttled.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#RequestThrottled","message":"Rate exceeded"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	subID, secret := b.subscribe(t, "--tenant", "tenant-proc", "--url", env.SubscriptionURL("events.fifo"), "--event-types", "budget.exhausted",
		"--max-retries", "5", "--initial-delay-ms", "100", "--backoff-multiplier", "1.0", "--max-delay-ms", "1000")
	awsDir := t.TempDir()
	r := startRelay(t, b.env(
		"JETRELAY_SQS_ENDPOINT", proxy.URL,
		"AWS_ACCESS_KEY_ID", "AKIDTEST", "AWS_SECRET_ACCESS_KEY", "sqs-secret-not-logged",
		"AWS_CONFIG_FILE", filepath.Join(awsDir, "config"), "AWS_SHARED_CREDENTIALS_FILE", filepath.Join(awsDir, "credentials"),
		"AWS_EC2_METADATA_DISABLED", "true",
	))
	ev := event("budget.exhausted")
	eventID, ids, err := b.writer.Emit(ctx, ev, admin.TraceSnapshot{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("emit: %v %v, want one delivery", ids, err)
	}
	b.awaitSuccess(t, ids, 20*time.Second)
	rec, err := b.store.Delivery(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts != 3 || throttled.Load() != 2 {
		t.Errorf("delivery succeeded after %d attempts with %d throttled sends; want 3 attempts, the first 2 throttled", rec.Attempts, throttled.Load())
	}

	again := b.resend(t, eventID, subID)
	b.awaitSuccess(t, []string{again}, 20*time.Second)

	out, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl: aws.String(env.QueueURL("events.fifo")), MaxNumberOfMessages: 10,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("FIFO queue holds %d messages after a delivery and a resend of one event, want 1", len(out.Messages))
	}
	msg := out.Messages[0]
	got := received{body: []byte(aws.ToString(msg.Body)), headers: map[string]string{}}
	for k, v := range msg.MessageAttributes {
		got.headers[k] = aws.ToString(v.StringValue)
	}
	checkIdentity(t, got, ev, eventID, secret)
	if a := msg.Attributes; a["MessageDeduplicationId"] != eventID || a["MessageGroupId"] != subID {
		t.Errorf("dedup id %q, group %q; want the event id %q and the subscription id %q", a["MessageDeduplicationId"], a["MessageGroupId"], eventID, subID)
	}
	if logs := r.logs.String(); strings.Contains(logs, "sqs-secret-not-logged") {
		t.Error("the relay logged the AWS secret access key")
	}
}

func TestSubscriptionsCLI_WritesAdminRecordsAndHidesCredentials(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	ctx := context.Background()
	const pw = "nats-pw-never-shown"
	natsURL := "nats://alice:" + pw + "@127.0.0.1:4222/orders.events"
	id, secret := b.subscribe(t, "--tenant", "acme", "--url", natsURL, "--event-types", "budget.exhausted,budget.low",
		"--name", "orders to NATS", "--header", "X-Team=payments", "--max-retries", "3")

	raw, err := b.redis.Client.Get(ctx, store.SubscriptionKey(id)).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := proto.ParseSubscription(raw)
	if err != nil {
		t.Fatalf("stored record unreadable: %v", err)
	}
	three := 3
	want := admin.Subscription{ID: id, TenantID: "acme", Name: "orders to NATS", URL: natsURL,
		EventTypes: []string{"budget.exhausted", "budget.low"}, Headers: map[string]string{"X-Team": "payments"},
		RetryPolicy: &proto.RetryPolicy{MaxRetries: &three}, CreatedAt: sub.CreatedAt.Time}
	if string(raw) != string(want.JSON()) {
		t.Errorf("stored record is not admin's serialization\n got: %s\nwant: %s", raw, want.JSON())
	}
	for _, set := range []string{"webhooks:acme", "webhooks:_all"} {
		if ok, _ := b.redis.Client.SIsMember(ctx, set, id).Result(); !ok {
			t.Errorf("%s does not list %s", set, id)
		}
	}
	stored, err := b.redis.Client.Get(ctx, store.SecretKey(id)).Result()
	if err != nil || !strings.HasPrefix(stored, "enc:") {
		t.Fatalf("secret stored as %q (%v), want enc:…", stored, err)
	}
	key, _ := proto.ParseSecretKey(b.keyB64)
	if plain, err := key.Decrypt(stored); err != nil || plain != secret {
		t.Errorf("stored secret decrypts to %q (%v), want the printed one", plain, err)
	}

	env := map[string]string{"REDIS_URL": b.redis.Server.URL()}
	code, out := runBinary(t, env, 15*time.Second, "subscriptions", "get", id)
	if code != 0 || !strings.Contains(out, `"subscription_id":"`+id+`"`) {
		t.Errorf("get exited %d with:\n%s\nwant the record", code, out)
	}
	if strings.Contains(out, pw) || strings.Contains(out, secret) {
		t.Errorf("get shows the URL's password or the signing secret:\n%s", out)
	}

	if code, out := runBinary(t, env, 15*time.Second, "subscriptions", "set-status", id, "paused"); code != 0 {
		t.Fatalf("set-status exited %d:\n%s", code, out)
	}
	raw, _ = b.redis.Client.Get(ctx, store.SubscriptionKey(id)).Bytes()
	if sub, err := proto.ParseSubscription(raw); err != nil || sub.Status != proto.SubscriptionPaused || sub.UpdatedAt == nil {
		t.Errorf("after set-status paused the record is %s; want status PAUSED and updated_at", raw)
	}

	code, out = runBinary(t, env, 15*time.Second, "subscriptions", "list", "--tenant", "acme")
	if code != 0 {
		t.Fatalf("list exited %d:\n%s", code, out)
	}
	if strings.Contains(out, pw) || strings.Contains(out, "alice") {
		t.Errorf("list shows the URL's credentials:\n%s", out)
	}
	if !strings.Contains(out, id) || !strings.Contains(out, "PAUSED") || !strings.Contains(out, "nats://***@127.0.0.1:4222/orders.events") {
		t.Errorf("list does not show %s as PAUSED with its URL redacted:\n%s", id, out)
	}

	code, out = runBinary(t, map[string]string{"REDIS_PASSWORD": pw, "WEBHOOK_SECRET_ENCRYPTION_KEY": b.keyB64}, 15*time.Second, "subscriptions", "create", "--help")
	if code != 0 || !strings.Contains(out, "-event-types") {
		t.Errorf("create --help exited %d with:\n%s\nwant 0 and the flags", code, out)
	}
	if strings.Contains(out, pw) || strings.Contains(out, b.keyB64) {
		t.Errorf("create --help shows the Redis password or the key from the environment:\n%s", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"scheme no transport handles", []string{"create", "--url", "ftp://bob:" + pw + "@files.example/x", "--event-types", "budget.exhausted"}, "unsupported URL scheme"},
		{"URL its transport can never deliver to", []string{"create", "--url", "nats://bob:" + pw + "@127.0.0.1:4222/", "--event-types", "budget.exhausted"}, "subject"},
		{"no url", []string{"create", "--event-types", "budget.exhausted"}, "--url is required"},
		{"no event types", []string{"create", "--url", "nats:///x.y"}, "event_type"},
		{"header without a value", []string{"create", "--url", "nats:///x.y", "--event-types", "budget.exhausted", "--header", "X-A"}, "name=value"},
		{"retries out of range", []string{"create", "--url", "nats:///x.y", "--event-types", "budget.exhausted", "--max-retries", "11"}, "max_retries"},
		{"unknown status", []string{"set-status", id, "ENABLED"}, "not ACTIVE, PAUSED or DISABLED"},
		{"unknown subscription", []string{"set-status", "whsub_missing", "ACTIVE"}, "not found"},
		{"unknown subcommand", []string{"delete", id}, "unknown subcommand"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runBinary(t, env, 15*time.Second, append([]string{"subscriptions"}, tc.args...)...)
			if code == 0 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output:\n%s\nwant a failure saying %q", code, out, tc.want)
			}
			if strings.Contains(out, pw) {
				t.Errorf("the error echoes a password:\n%s", out)
			}
		})
	}
}
