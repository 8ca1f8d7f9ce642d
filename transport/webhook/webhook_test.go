package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

const (
	testSecret  = "whsec_test"
	testTraceID = "0af7651916cd43dd8448eb211c80319c"
	testParent  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

var testBody = []byte(`{"event_id":"evt-1","event_type":"tenant.created","data":{"amount":1.50},"x_unknown":true}`)

// seen is one request as a receiver saw it.
type seen struct {
	method, path, proto string
	header              http.Header
	body                []byte
}

// receiver is a real HTTP server on loopback that records what it receives
// and answers with respond (204 when nil).
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []seen
	hits chan struct{}
}

func newReceiver(t *testing.T, respond http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{hits: make(chan struct{}, 1000)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, seen{req.Method, req.URL.Path, req.Proto, req.Header.Clone(), body})
		r.mu.Unlock()
		r.hits <- struct{}{}
		if respond == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		respond(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seen(nil), r.got...)
}

func newTransport(t *testing.T, cfg webhook.Config) *webhook.Transport {
	t.Helper()
	tr, err := webhook.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(tr.Close)
	return tr
}

func newRequest(url string) *transport.Request {
	return &transport.Request{
		URL:            url,
		Body:           testBody,
		EventID:        "evt-1",
		EventType:      "tenant.created",
		Signature:      proto.Sign(testSecret, testBody),
		TraceID:        testTraceID,
		Traceparent:    testParent,
		RequestID:      "req-42",
		Headers:        map[string]string{"X-Api-Key": "k-123", "authorization": "Bearer tok"},
		DeliveryID:     "del-1",
		SubscriptionID: "whsub-1",
		Attempt:        1,
	}
}

func TestDeliver_SendsContractHeadersAndExactBody(t *testing.T) {
	rcv := newReceiver(t, nil)
	tr := newTransport(t, webhook.Config{})

	res, err := tr.Deliver(context.Background(), newRequest(rcv.URL+"/hook"))
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if res.Outcome != transport.Delivered || res.StatusCode != 204 || res.Message != "" || res.Latency <= 0 {
		t.Fatalf("result = %+v, want delivered 204 with latency", res)
	}
	got := rcv.requests()
	if len(got) != 1 {
		t.Fatalf("receiver saw %d requests, want 1", len(got))
	}
	r := got[0]
	if r.method != http.MethodPost || r.path != "/hook" {
		t.Errorf("request = %s %s, want POST /hook", r.method, r.path)
	}
	if !bytes.Equal(r.body, testBody) {
		t.Errorf("body = %s, want %s byte for byte", r.body, testBody)
	}
	want := map[string]string{
		"Content-Type":        "application/json",
		"User-Agent":          webhook.DefaultUserAgent,
		"X-Cycles-Event-Id":   "evt-1",
		"X-Cycles-Event-Type": "tenant.created",
		"X-Cycles-Trace-Id":   testTraceID,
		"Traceparent":         testParent,
		"X-Request-Id":        "req-42",
		"X-Cycles-Signature":  "sha256=" + hmacHex(testSecret, testBody),
		"X-Api-Key":           "k-123",
		"Authorization":       "Bearer tok",
	}
	for name, value := range want {
		if vs := r.header.Values(name); len(vs) != 1 || vs[0] != value {
			t.Errorf("header %s = %q, want exactly [%q]", name, vs, value)
		}
	}
	for name := range r.header {
		if _, ok := want[name]; !ok && name != "Content-Length" {
			t.Errorf("unexpected header %s: %q", name, r.header[name])
		}
	}
	if !proto.Verify(testSecret, r.body, r.header.Get("X-Cycles-Signature")) {
		t.Error("signature does not verify over the received body")
	}
}

func hmacHex(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

func TestDeliver_OmitsSignatureAndRequestIDWhenEmpty(t *testing.T) {
	for _, requestID := range []string{"", "   "} {
		rcv := newReceiver(t, nil)
		tr := newTransport(t, webhook.Config{})
		req := newRequest(rcv.URL)
		req.Signature, req.RequestID, req.Headers = "", requestID, nil

		if _, err := tr.Deliver(context.Background(), req); err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		h := rcv.requests()[0].header
		for _, name := range []string{"X-Cycles-Signature", "X-Request-Id"} {
			if vs, ok := h[name]; ok {
				t.Errorf("request id %q: header %s = %q, want it absent", requestID, name, vs)
			}
		}
		if h.Get("X-Cycles-Event-Id") != "evt-1" {
			t.Errorf("event id header missing")
		}
	}
}

func TestDeliver_WritesLowercaseTraceparentAndNoUpgradeOnTheWire(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	wire := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		var head strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if line == "\r\n" {
				break
			}
		}
		_, _ = io.CopyN(io.Discard, br, int64(len(testBody)))
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		wire <- head.String()
	}()
	tr := newTransport(t, webhook.Config{})

	res, err := tr.Deliver(context.Background(), newRequest("http://"+ln.Addr().String()+"/raw"))
	if err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver = %+v, %v; want delivered", res, err)
	}
	head := <-wire
	if !strings.HasPrefix(head, "POST /raw HTTP/1.1\r\n") {
		t.Errorf("request line: %q", strings.SplitN(head, "\r\n", 2)[0])
	}
	for _, line := range []string{
		"\r\ntraceparent: " + testParent + "\r\n",
		"\r\nContent-Type: application/json\r\n",
		"\r\nContent-Length: " + strconv.Itoa(len(testBody)) + "\r\n",
	} {
		if !strings.Contains(head, line) {
			t.Errorf("wire head lacks %q:\n%s", strings.TrimSpace(line), head)
		}
	}
	for _, bad := range []string{"Traceparent:", "Upgrade", "HTTP2-Settings", "Accept-Encoding"} {
		if strings.Contains(head, bad) {
			t.Errorf("wire head contains %q:\n%s", bad, head)
		}
	}
}

func TestNew_RejectsInvalidConfig(t *testing.T) {
	cases := map[string]webhook.Config{
		"negative connect timeout": {ConnectTimeout: -time.Second},
		"negative request timeout": {RequestTimeout: -time.Second},
		"negative body limit":      {MaxResponseBody: -1},
		"negative idle conns":      {MaxIdleConnsPerHost: -1},
		"user agent with CRLF":     {UserAgent: "x\r\nX-Evil: 1"},
	}
	for name, cfg := range cases {
		if _, err := webhook.New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}

func TestDeliver_UsesConfiguredUserAgent(t *testing.T) {
	rcv := newReceiver(t, nil)
	tr := newTransport(t, webhook.Config{UserAgent: "cycles-server-events/9 (custom)"})
	if _, err := tr.Deliver(context.Background(), newRequest(rcv.URL)); err != nil {
		t.Fatal(err)
	}
	if ua := rcv.requests()[0].header.Get("User-Agent"); ua != "cycles-server-events/9 (custom)" {
		t.Errorf("User-Agent = %q", ua)
	}
}

func TestDeliver_DoesNotTouchTheBodyAfterReturning(t *testing.T) {
	// The receiver answers before reading an 8 MiB body while net/http is
	// still writing it; -race reports any read not ordered before return.
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}))
	defer rcv.Close()
	tr := newTransport(t, webhook.Config{})
	req := newRequest(rcv.URL)
	req.Body = bytes.Repeat([]byte("a"), 8<<20)

	res, err := tr.Deliver(context.Background(), req)
	if err == nil && res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("Deliver = %+v, want HTTP 413 (or a reset)", res)
	}
	for i := range req.Body {
		req.Body[i] = 'b' // the caller reuses its buffer
	}
}

func TestDeliver_SendsAnEmptyBodyWithContentLengthZero(t *testing.T) {
	rcv := newReceiver(t, nil)
	tr := newTransport(t, webhook.Config{})
	req := newRequest(rcv.URL)
	req.Body, req.Signature = nil, ""

	if _, err := tr.Deliver(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := rcv.requests()[0]; len(got.body) != 0 || got.header.Get("Content-Length") != "0" {
		t.Errorf("receiver saw body %q with Content-Length %q, want empty with 0", got.body, got.header.Get("Content-Length"))
	}
}
