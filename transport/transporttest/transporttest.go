package transporttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// Behaviour is how a test destination answers.
type Behaviour int

// Behaviours a Harness's destinations can take.
const (
	// Accept takes every message and lets the suite read it back.
	Accept Behaviour = iota + 1
	// Reject answers every message without taking it (an HTTP 503, a
	// JetStream error, an SQS error response).
	Reject
	// Throttle answers that the sender must slow down (an HTTP 429, a full
	// stream, an SQS throttling error).
	Throttle
	// Hang accepts the connection or request and never answers.
	Hang
)

func (b Behaviour) String() string {
	return map[Behaviour]string{Accept: "accept", Reject: "reject", Throttle: "throttle", Hang: "hang"}[b]
}

// Message is what arrived at a destination, as the destination's consumer
// reads it (HTTP headers, NATS headers, SQS message attributes).
type Message struct {
	Body        []byte
	EventID     string
	EventType   string
	Signature   string // "" when none was sent
	TraceID     string
	Traceparent string
	RequestID   string            // "" when none was sent
	Headers     map[string]string // every header or attribute that arrived (the custom ones among them)
}

// Destination is one test destination the Harness set up.
type Destination struct {
	// URL is the subscription URL that reaches it.
	URL string
	// Received returns the messages the destination has taken so far. For
	// an Accept destination the suite polls it until what it sent arrives.
	Received func() []Message
}

// Harness is what a transport gives the suite.
type Harness struct {
	// Transport returns the transport under test. The suite calls it once
	// per subtest; the harness closes it (t.Cleanup) when needed.
	Transport func(t *testing.T) transport.Transport
	// Destination sets up a destination that behaves as b, or returns false
	// when the transport's protocol has no such answer (a NATS subject
	// cannot ask for a Retry-After); that check is then skipped.
	Destination func(t *testing.T, b Behaviour) (Destination, bool)
	// Malformed lists URLs of the transport's own scheme that can never be
	// delivered to (no subject, no queue, a bad port, …). The suite adds
	// malformed URLs of its own.
	Malformed []string
	// CustomHeaders reports that the subscription's custom headers reach the
	// destination; the suite then checks that they do.
	CustomHeaders bool
	// Unreachable, if set, returns a URL of the transport's scheme that
	// carries user and password and names a destination nobody listens on
	// (a closed loopback port); the suite checks that the connection error
	// quotes neither. Nil, or false, when the scheme takes no credentials in
	// its URL.
	Unreachable func(t *testing.T, user, password string) (url string, ok bool)
	// WithDialer, if set, returns the transport under test opened with dial
	// as its connection dialer (what the host offers as Env.Dialer, the
	// SSRF guard); the suite checks that deliveries to Accept destinations
	// go through it and that its refusal comes back as transport.ErrBlocked.
	// Nil when the transport dials no TCP of its own for the URLs the
	// Harness gives.
	WithDialer func(t *testing.T, dial transport.DialFunc) transport.Transport
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Transport == nil || h.Destination == nil {
		t.Fatal("transporttest: Harness needs Transport and Destination")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, h)
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, h Harness)
}

var cases = []testCase{
	{"accepted event arrives with identity signature and trace", testDelivered},
	{"unsigned event arrives without a signature", testUnsigned},
	{"Standard Webhooks headers arrive beside the Cycles signature", testStandardWebhooks},
	{"rejection is a failed result not an error", testRejected},
	{"throttling is a throttled result", testThrottled},
	{"deadline is honoured and retryable", testDeadline},
	{"cancellation is honoured", testCancel},
	{"malformed targets are refused permanently without credentials", testMalformed},
	{"control characters in identity are refused permanently", testHostileValues},
	{"reserved custom headers never replace the relay's", testReservedHeaders},
	{"connection errors carry no credentials from the URL", testUnreachable},
	{"connections go through the provided dialer", testDialer},
	{"safe for concurrent use", testConcurrent},
	{"no goroutines are left behind", testNoLeak},
}

// testBody is a realistic stored event; its signature is over these bytes.
var testBody = []byte(`{"event_id":"evt_conformance","event_type":"budget.exhausted","data":{"remaining":0,"unit":"TOKENS"}}`)

// NewRequest returns a complete Request to url, as the engine builds one,
// for tests beyond the suite. id makes the event id unique.
func NewRequest(url, id string) *transport.Request {
	return &transport.Request{
		URL:            url,
		Body:           bytes.Clone(testBody),
		EventID:        "evt_" + id,
		EventType:      "budget.exhausted",
		Signature:      "sha256=6f1c0ae34c5b4f1d9b0a8e8e4c3a2f0d1e9b8c7a6f5e4d3c2b1a0f9e8d7c6b5a",
		TraceID:        "0af7651916cd43dd8448eb211c80319c",
		Traceparent:    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		RequestID:      "req-" + id,
		DeliveryID:     "del_" + id,
		SubscriptionID: "whsub_conformance",
		Attempt:        1,
	}
}

func destination(t *testing.T, h Harness, b Behaviour) Destination {
	t.Helper()
	d, ok := h.Destination(t, b)
	if !ok {
		t.Skipf("the transport's destinations cannot %s", b)
	}
	if d.URL == "" {
		t.Fatalf("Harness.Destination(%s) returned an empty URL", b)
	}
	return d
}

func deliver(t *testing.T, tr transport.Transport, ctx context.Context, req *transport.Request) (transport.Result, error) {
	t.Helper()
	type answer struct {
		res transport.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := tr.Deliver(ctx, req)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		checkReason(t, a.res, a.err)
		return a.res, a.err
	case <-time.After(30 * time.Second):
		t.Fatalf("Deliver did not return within 30s")
		return transport.Result{}, nil
	}
}

// checkReason checks a declared answer is well-formed: a Reason only on an
// answer that was not an acceptance, and a metric-safe token
// (transport.ValidReason), so metrics stay bounded.
func checkReason(t *testing.T, res transport.Result, err error) {
	t.Helper()
	switch {
	case res.Reason == "":
	case err != nil || res.Outcome == transport.Delivered:
		t.Errorf("Result.Reason %q on a send that got no answer or was delivered; a Reason names a refusal", res.Reason)
	case !transport.ValidReason(res.Reason):
		t.Errorf("Result.Reason %q is not a metric-safe token (transport.ValidReason)", res.Reason)
	}
}

// await polls the destination until a message with eventID arrived.
func await(t *testing.T, d Destination, eventID string) Message {
	t.Helper()
	// Generous: a loaded CI machine running -race can take a while to get
	// a broker-backed destination (an SQS emulator) to hand a message over.
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, m := range d.Received() {
			if m.EventID == eventID {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %s never reached the destination (received %d messages)", eventID, len(d.Received()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testDelivered(t *testing.T, h Harness) {
	tr := h.Transport(t)
	d := destination(t, h, Accept)
	req := NewRequest(d.URL, "delivered")
	if h.CustomHeaders {
		req.Headers = map[string]string{"X-Tenant-Route": "eu-1"}
	}
	res, err := deliver(t, tr, context.Background(), req)
	if err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver to an accepting destination = %+v, %v; want Delivered, nil", res, err)
	}
	if c, _ := transport.Classify(res, err); c != transport.Accepted {
		t.Errorf("Classify = %s, want accepted", c)
	}
	m := await(t, d, req.EventID)
	if string(m.Body) != string(req.Body) {
		t.Errorf("body arrived as %q, want %q", m.Body, req.Body)
	}
	// Every identity header of the one definition arrives with its value.
	identity, err := transport.IdentityHeaders(req)
	if err != nil {
		t.Fatal(err)
	}
	arrived := map[string]string{
		proto.HeaderEventID: m.EventID, proto.HeaderEventType: m.EventType, proto.HeaderSignature: m.Signature,
		proto.HeaderTraceID: m.TraceID, proto.HeaderTraceparent: m.Traceparent, proto.HeaderRequestID: m.RequestID,
	}
	for _, want := range identity {
		if got, ok := arrived[want.Name]; ok && got != want.Value {
			t.Errorf("%s arrived as %q, want %q", want.Name, got, want.Value)
		}
	}
	if h.CustomHeaders && m.Headers["X-Tenant-Route"] != "eu-1" {
		t.Errorf("custom header X-Tenant-Route arrived as %q, want eu-1 (headers %v)", m.Headers["X-Tenant-Route"], m.Headers)
	}
	if n := count(d.Received(), req.EventID); n != 1 {
		t.Errorf("the destination received the event %d times, want once", n)
	}
}

func testUnsigned(t *testing.T, h Harness) {
	tr := h.Transport(t)
	d := destination(t, h, Accept)
	req := NewRequest(d.URL, "unsigned")
	req.Signature, req.RequestID = "", ""
	if res, err := deliver(t, tr, context.Background(), req); err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver = %+v, %v; want Delivered", res, err)
	}
	m := await(t, d, req.EventID)
	if m.Signature != "" || m.RequestID != "" {
		t.Errorf("an unsigned event without request id arrived with signature %q, request id %q; want neither", m.Signature, m.RequestID)
	}
}

// testStandardWebhooks: a subscription that uses Standard Webhooks gets
// webhook-id, webhook-timestamp and webhook-signature (read from
// Message.Headers, whatever case the protocol gives the names), and
// X-Cycles-Signature unchanged beside them.
func testStandardWebhooks(t *testing.T, h Harness) {
	tr := h.Transport(t)
	d := destination(t, h, Accept)
	req := NewRequest(d.URL, "stdwebhooks")
	req.WebhookID, req.WebhookTimestamp = req.EventID, "1700000000"
	req.WebhookSignature = "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	if res, err := deliver(t, tr, context.Background(), req); err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver = %+v, %v; want Delivered", res, err)
	}
	m := await(t, d, req.EventID)
	for name, want := range map[string]string{
		proto.HeaderWebhookID: req.WebhookID, proto.HeaderWebhookTimestamp: req.WebhookTimestamp,
		proto.HeaderWebhookSignature: req.WebhookSignature,
	} {
		if got := headerFold(m.Headers, name); got != want {
			t.Errorf("%s arrived as %q, want %q", name, got, want)
		}
	}
	if m.Signature != req.Signature {
		t.Errorf("X-Cycles-Signature arrived as %q, want %q beside the Standard Webhooks headers", m.Signature, req.Signature)
	}
}

func headerFold(headers map[string]string, name string) string {
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func testRejected(t *testing.T, h Harness) {
	tr := h.Transport(t)
	d := destination(t, h, Reject)
	res, err := deliver(t, tr, context.Background(), NewRequest(d.URL, "rejected"))
	if err != nil || res.Outcome != transport.Failed {
		t.Fatalf("Deliver to a rejecting destination = %+v, %v; want Outcome failed and a nil error (the destination answered)", res, err)
	}
	if res.Message == "" {
		t.Error("a failed Result needs a Message saying what the destination answered")
	}
	if c, _ := transport.Classify(res, err); c != transport.Retryable {
		t.Errorf("Classify = %s, want retryable", c)
	}
}

func testThrottled(t *testing.T, h Harness) {
	tr := h.Transport(t)
	d := destination(t, h, Throttle)
	res, err := deliver(t, tr, context.Background(), NewRequest(d.URL, "throttled"))
	if err != nil || res.Outcome != transport.Throttled {
		t.Fatalf("Deliver to a throttling destination = %+v, %v; want Outcome throttled and a nil error", res, err)
	}
	if res.RetryAfter < 0 {
		t.Errorf("RetryAfter = %s, must not be negative", res.RetryAfter)
	}
}

func testDeadline(t *testing.T, h Harness) {
	tr := h.Transport(t)
	d := destination(t, h, Hang)
	const limit = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	res, err := deliver(t, tr, ctx, NewRequest(d.URL, "deadline"))
	took := time.Since(start)
	if err == nil {
		t.Fatalf("Deliver to a destination that never answers = %+v, nil; want an error", res)
	}
	if errors.Is(err, transport.ErrPermanent) {
		t.Errorf("a timeout must stay retryable, got a permanent error: %v", err)
	}
	if took > limit+2*time.Second {
		t.Errorf("Deliver returned %s after a %s deadline", took, limit)
	}
}

func testCancel(t *testing.T, h Harness) {
	tr := h.Transport(t)
	d := destination(t, h, Hang)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := deliver(t, tr, ctx, NewRequest(d.URL, "cancel"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Deliver after cancellation returned %v; want an error wrapping context.Canceled", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Deliver returned %s after its context was cancelled", took)
	}
}

// hostileURLs are malformed for every transport.
var hostileURLs = []string{
	"",
	"not a url",
	"ftp://user:s3cret@files.example.com/drop",
	"%zz://user:s3cret@host/x",
	"://user:s3cret@host/x",
}

func testMalformed(t *testing.T, h Harness) {
	tr := h.Transport(t)
	for _, raw := range append(append([]string{}, hostileURLs...), h.Malformed...) {
		res, err := deliver(t, tr, context.Background(), NewRequest(raw, "malformed"))
		switch {
		case err == nil:
			t.Errorf("Deliver(%q) = %+v, nil; want a permanent error", raw, res)
			continue
		case !errors.Is(err, transport.ErrPermanent):
			t.Errorf("Deliver(%q) error %q is not permanent: no retry can fix it", raw, err)
		case strings.TrimSpace(err.Error()) == "":
			t.Errorf("Deliver(%q) returned an empty error message", raw)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Deliver(%q) error %q quotes the password", raw, err)
		}
	}
}

func testHostileValues(t *testing.T, h Harness) {
	tr := h.Transport(t)
	d := destination(t, h, Accept)
	for name, mutate := range map[string]func(*transport.Request){
		"event id":    func(r *transport.Request) { r.EventID = "evt_1\r\nX-Injected: yes" },
		"event type":  func(r *transport.Request) { r.EventType = "budget.exhausted\nX: y" },
		"traceparent": func(r *transport.Request) { r.Traceparent = "00-abc\r\n" },
	} {
		req := NewRequest(d.URL, "hostile")
		mutate(req)
		res, err := deliver(t, tr, context.Background(), req)
		if err == nil || !errors.Is(err, transport.ErrPermanent) {
			t.Errorf("CR/LF in the %s: Deliver = %+v, %v; want a permanent error", name, res, err)
		}
	}
	if n := len(d.Received()); n != 0 {
		t.Errorf("%d hostile messages reached the destination; want none", n)
	}
}

func testConcurrent(t *testing.T, h Harness) {
	tr := h.Transport(t)
	d := destination(t, h, Accept)
	const workers, each = 16, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				req := NewRequest(d.URL, fmt.Sprintf("c%d-%d", w, i))
				res, err := tr.Deliver(context.Background(), req)
				if err != nil || res.Outcome != transport.Delivered {
					errs <- fmt.Errorf("%s: %+v, %v", req.EventID, res, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error("concurrent Deliver failed:", err)
	}
	for w := range workers {
		for i := range each {
			await(t, d, fmt.Sprintf("evt_c%d-%d", w, i))
		}
	}
}

func testNoLeak(t *testing.T, h Harness) {
	tr := h.Transport(t)
	accept := destination(t, h, Accept)
	hang, canHang := h.Destination(t, Hang)
	reject, canReject := h.Destination(t, Reject)
	// Warm up: connections a transport keeps for reuse are not leaks.
	for i := range 3 {
		_, _ = tr.Deliver(context.Background(), NewRequest(accept.URL, fmt.Sprintf("warm%d", i)))
	}
	before := runtime.NumGoroutine()
	for i := range 20 {
		_, _ = tr.Deliver(context.Background(), NewRequest(accept.URL, fmt.Sprintf("leak%d", i)))
		if canReject {
			_, _ = tr.Deliver(context.Background(), NewRequest(reject.URL, fmt.Sprintf("leakr%d", i)))
		}
		if canHang && i%4 == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, _ = tr.Deliver(ctx, NewRequest(hang.URL, fmt.Sprintf("leakh%d", i)))
			cancel()
		}
	}
	// A few goroutines may come and go (a kept-alive connection, the
	// runtime's own); one per delivery does not.
	const slack = 6
	// Generous: a loaded CI machine running -race can take a while to get
	// a broker-backed destination (an SQS emulator) to hand a message over.
	deadline := time.Now().Add(30 * time.Second)
	for {
		now := runtime.NumGoroutine()
		if now <= before+slack {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before 20+ deliveries, %d after: Deliver leaks goroutines\n%s", before, now, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func count(ms []Message, eventID string) int {
	n := 0
	for _, m := range ms {
		if m.EventID == eventID {
			n++
		}
	}
	return n
}
