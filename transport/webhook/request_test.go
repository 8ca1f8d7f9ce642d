package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

func TestDeliver_RefusesForbiddenCustomHeadersWithoutSending(t *testing.T) {
	cases := []struct {
		name, header, value string
		wantInMessage       string
	}{
		{"Content-Type duplicate", "Content-Type", "text/plain", "Content-Type"},
		{"lowercase content-type", "content-type", "text/plain", "content-type"},
		{"forged event id", "X-Cycles-Event-Id", "evt-forged", "X-Cycles-Event-Id"},
		{"any x-cycles name", "x-cycles-anything", "1", "x-cycles-anything"},
		{"forged signature", "X-Cycles-Signature", "sha256=00", "X-Cycles-Signature"},
		{"traceparent", "traceparent", "00-x", "traceparent"},
		{"User-Agent", "User-Agent", "curl", "User-Agent"},
		{"X-Request-Id", "X-Request-Id", "r", "X-Request-Id"},
		{"Host", "Host", "evil.example", "Host"},
		{"Content-Length", "Content-Length", "0", "Content-Length"},
		{"Transfer-Encoding", "Transfer-Encoding", "chunked", "Transfer-Encoding"},
		{"Upgrade", "Upgrade", "h2c", "Upgrade"},
		{"Connection", "Connection", "close", "Connection"},
		{"name with a space", "X Bad", "1", "X Bad"},
		{"empty name", "", "1", "name"},
		{"value with CRLF", "X-Token", "secret-value\r\nX-Injected: 1", "X-Token"},
		{"value with LF", "X-Token", "secret-value\nX-Injected: 1", "X-Token"},
		{"value with NUL", "X-Token", "secret-value\x00", "X-Token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, nil)
			tr := newTransport(t, webhook.Config{})
			req := newRequest(rcv.URL)
			req.Headers = map[string]string{"X-Fine": "ok", tc.header: tc.value}

			res, err := tr.Deliver(context.Background(), req)
			if !errors.Is(err, transport.ErrPermanent) {
				t.Fatalf("Deliver = %+v, %v; want a permanent error", res, err)
			}
			if !strings.Contains(err.Error(), tc.wantInMessage) {
				t.Errorf("error %q does not name the header %q", err, tc.wantInMessage)
			}
			if strings.Contains(err.Error(), "secret-value") {
				t.Errorf("error %q quotes the header's value", err)
			}
			if n := len(rcv.requests()); n != 0 {
				t.Errorf("receiver saw %d requests, want none", n)
			}
		})
	}
}

func TestDeliver_RefusesControlCharactersInStandardHeaderValues(t *testing.T) {
	cases := map[string]func(*transport.Request){
		"event id":    func(r *transport.Request) { r.EventID = "evt-1\r\nX-Injected: 1" },
		"event type":  func(r *transport.Request) { r.EventType = "tenant.created\n" },
		"trace id":    func(r *transport.Request) { r.TraceID = "abc\x00" },
		"traceparent": func(r *transport.Request) { r.Traceparent = "00-\r\n" },
		"request id":  func(r *transport.Request) { r.RequestID = "req\r\n" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			rcv := newReceiver(t, nil)
			tr := newTransport(t, webhook.Config{})
			req := newRequest(rcv.URL)
			mutate(req)
			if _, err := tr.Deliver(context.Background(), req); !errors.Is(err, transport.ErrPermanent) {
				t.Fatalf("Deliver error = %v, want permanent", err)
			}
			if n := len(rcv.requests()); n != 0 {
				t.Errorf("receiver saw %d requests, want none", n)
			}
		})
	}
}

func TestDeliver_RefusesInvalidURLsWithoutLeakingThem(t *testing.T) {
	cases := map[string]string{
		"unparseable":       "http://user:s3cret@exa mple.com/?token=s3cret",
		"ftp scheme":        "ftp://user:s3cret@example.com/",
		"no scheme":         "example.com/hook?token=s3cret",
		"empty host":        "http:///hook?token=s3cret",
		"opaque":            "http:s3cret",
		"port out of range": "http://127.0.0.1:70000/?token=s3cret",
		"empty":             "",
	}
	tr := newTransport(t, webhook.Config{})
	for name, url := range cases {
		t.Run(name, func(t *testing.T) {
			req := newRequest(url)
			_, err := tr.Deliver(context.Background(), req)
			if !errors.Is(err, transport.ErrPermanent) {
				t.Fatalf("Deliver(%q) error = %v, want permanent", url, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q leaks part of the URL", err)
			}
		})
	}
}

func TestDeliver_SendsUserinfoAsBasicAuth(t *testing.T) {
	rcv := newReceiver(t, nil)
	tr := newTransport(t, webhook.Config{})
	req := newRequest(strings.Replace(rcv.URL, "http://", "http://alice:pw@", 1))
	req.Headers = nil

	if _, err := tr.Deliver(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := rcv.requests()[0].header.Get("Authorization"); got != "Basic YWxpY2U6cHc=" {
		t.Errorf("Authorization = %q, want Basic credentials from the URL", got)
	}
}

func TestDeliver_RefusesOversizedCustomHeaderSetsWithoutSending(t *testing.T) {
	many := map[string]string{}
	for i := range 500 {
		many[fmt.Sprintf("X-Tag-%03d", i)] = "secret-value"
	}
	atCount := map[string]string{}
	for i := range transport.MaxCustomHeaders {
		atCount[fmt.Sprintf("X-Tag-%03d", i)] = "v"
	}
	cases := []struct {
		name          string
		headers       map[string]string
		wantInMessage string // "" = sent
	}{
		{"500 headers", many, "500 custom headers, at most 64"},
		{"one value of 1 MB", map[string]string{"X-Big": strings.Repeat("secret-value", 1<<20/12)}, "at most 16384"},
		{"many values just under the bound each", map[string]string{"X-A": strings.Repeat("a", 9000), "X-B": strings.Repeat("b", 9000)}, "18006 bytes"},
		{"exactly the count bound", atCount, ""},
		{"exactly the byte bound", map[string]string{"X-A": strings.Repeat("a", transport.MaxCustomHeaderBytes-3)}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, nil)
			tr := newTransport(t, webhook.Config{})
			req := newRequest(rcv.URL)
			req.Headers = tc.headers
			res, err := tr.Deliver(context.Background(), req)
			if tc.wantInMessage == "" {
				if err != nil || res.Outcome != transport.Delivered {
					t.Fatalf("Deliver = %+v, %v; want a set at its bound sent", res, err)
				}
				return
			}
			if !errors.Is(err, transport.ErrPermanent) || !strings.Contains(err.Error(), tc.wantInMessage) {
				t.Fatalf("Deliver = %+v, %v; want a permanent error saying %q", res, err, tc.wantInMessage)
			}
			if strings.Contains(err.Error(), "secret-value") {
				t.Errorf("error quotes a header value: %.200s", err)
			}
			if n := len(rcv.requests()); n != 0 {
				t.Errorf("receiver saw %d requests, want none", n)
			}
		})
	}
}
