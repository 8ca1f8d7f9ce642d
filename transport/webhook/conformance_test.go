package webhook_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/transporttest"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

func TestWebhook_PassesTheTransportConformanceSuite(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Transport: func(t *testing.T) transport.Transport {
			tr, err := webhook.New(webhook.Config{RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tr.Close)
			return tr
		},
		Destination:   receiverFor,
		Malformed:     []string{"http://", "https://user:s3cret@host:99999/x", "http://user:s3cret@/x"},
		CustomHeaders: true,
		Unreachable: func(t *testing.T, user, password string) (string, bool) {
			return "http://" + user + ":" + password + "@" + closedAddr(t) + "/hook", true
		},
		WithDialer: func(t *testing.T, dial transport.DialFunc) transport.Transport {
			tr, err := webhook.New(webhook.Config{RequestTimeout: 5 * time.Second, DialContext: dial})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tr.Close)
			return tr
		},
	})
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// receiverFor is a real HTTP receiver on loopback behaving as b.
func receiverFor(t *testing.T, b transporttest.Behaviour) (transporttest.Destination, bool) {
	var mu sync.Mutex
	var got []transporttest.Message
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch b {
		case transporttest.Reject:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case transporttest.Throttle:
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case transporttest.Hang:
			// The server notices the client hanging up only once the body
			// has been read.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		body, _ := io.ReadAll(r.Body)
		m := transporttest.Message{
			Body: body, EventID: r.Header.Get(proto.HeaderEventID), EventType: r.Header.Get(proto.HeaderEventType),
			Signature: r.Header.Get(proto.HeaderSignature), TraceID: r.Header.Get(proto.HeaderTraceID),
			Traceparent: r.Header.Get(proto.HeaderTraceparent), RequestID: r.Header.Get(proto.HeaderRequestID),
			Headers: map[string]string{},
		}
		for k := range r.Header {
			m.Headers[k] = r.Header.Get(k)
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return transporttest.Destination{URL: srv.URL + "/hook", Received: func() []transporttest.Message {
		mu.Lock()
		defer mu.Unlock()
		return append([]transporttest.Message(nil), got...)
	}}, true
}

// The webhook registers like every other transport: one driver for http and
// https, opened once, with the host's settings and destination policy.
func TestDriver_OpensOneTransportForHTTPAndHTTPSWithTheHostsPolicy(t *testing.T) {
	blocked := errors.New("blocked by policy")
	reg, err := transport.OpenRegistry(context.Background(), transport.Env{
		Getenv: func(k string) string { return map[string]string{webhook.SettingRequestTimeout: "2s"}[k] },
		Shared: map[any]any{transport.URLCheckKey{}: func(string) error { return transport.Permanent(blocked) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	plain, err := reg.Lookup("http://receiver.example/")
	if err != nil {
		t.Fatal(err)
	}
	secure, err := reg.Lookup("https://receiver.example/")
	if err != nil || secure != plain {
		t.Errorf("https transport %p, %v; want the http one, %p", secure, err, plain)
	}
	_, err = plain.Deliver(context.Background(), transporttest.NewRequest("http://receiver.example/", "policy"))
	if !errors.Is(err, blocked) {
		t.Errorf("Deliver = %v, want the host's URL check to refuse it", err)
	}
}
