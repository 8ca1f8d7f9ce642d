package webhook_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

// stalling is a receiver whose handler blocks until the test ends.
func stalling(t *testing.T) *receiver {
	t.Helper()
	release := make(chan struct{})
	rcv := newReceiver(t, func(http.ResponseWriter, *http.Request) { <-release })
	t.Cleanup(func() { close(release) }) // runs before the server closes
	return rcv
}

type timeouter interface{ Timeout() bool }

func TestDeliver_TimesOutOnAReceiverThatNeverAnswers(t *testing.T) {
	rcv := stalling(t)
	tr := newTransport(t, webhook.Config{RequestTimeout: 300 * time.Millisecond})

	start := time.Now()
	res, err := tr.Deliver(context.Background(), newRequest(rcv.URL))
	elapsed := time.Since(start)
	if err == nil {
		t.Fatalf("Deliver = %+v, nil; want a timeout error", res)
	}
	if err.Error() != "request timed out after 300ms" {
		t.Errorf("error = %q", err)
	}
	var to timeouter
	if !errors.As(err, &to) || !to.Timeout() {
		t.Errorf("error %v does not report Timeout()", err)
	}
	if errors.Is(err, transport.ErrPermanent) || errors.Is(err, context.Canceled) {
		t.Errorf("timeout error %v must be retryable and not look like the caller's cancellation", err)
	}
	if elapsed < 300*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("Deliver took %s, want about 300ms", elapsed)
	}
	if res.Latency < 300*time.Millisecond {
		t.Errorf("Latency = %s, want the time spent waiting", res.Latency)
	}
}

func TestDeliver_ReportsRefusedConnectionsWithoutTheURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tr := newTransport(t, webhook.Config{})

	res, err := tr.Deliver(context.Background(), newRequest("http://bob:s3cret@"+addr+"/hook?token=s3cret"))
	if err == nil {
		t.Fatalf("Deliver = %+v, nil; want an error", res)
	}
	if err.Error() != "connection refused" {
		t.Errorf("error = %q, want %q", err, "connection refused")
	}
	if errors.Is(err, transport.ErrPermanent) {
		t.Error("a refused connection must be retryable")
	}
	if res.Latency <= 0 {
		t.Errorf("Latency = %s, want > 0", res.Latency)
	}
}

func TestDeliver_AppliesConnectTimeoutToACustomDialer(t *testing.T) {
	tr := newTransport(t, webhook.Config{
		ConnectTimeout: 200 * time.Millisecond,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done() // a black-holed address
			return nil, ctx.Err()
		},
	})
	start := time.Now()
	_, err := tr.Deliver(context.Background(), newRequest("http://192.0.2.1/hook"))
	if err == nil || err.Error() != "connect timed out after 200ms" {
		t.Fatalf("Deliver error = %v, want a connect timeout", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Deliver took %s, want about 200ms", elapsed)
	}
}

func TestDeliver_KeepsAPermanentErrorFromTheDialer(t *testing.T) {
	tr := newTransport(t, webhook.Config{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			return nil, transport.Permanent(errors.New("address 10.0.0.1 is blocked"))
		},
	})
	_, err := tr.Deliver(context.Background(), newRequest("http://10.0.0.1/hook"))
	if !errors.Is(err, transport.ErrPermanent) || !strings.Contains(err.Error(), "blocked") {
		t.Fatalf("Deliver error = %v, want the dialer's permanent error", err)
	}
}

func TestDeliver_ReturnsByTheDeadlineWhenTheBodyDripsForever(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for {
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	})
	tr := newTransport(t, webhook.Config{RequestTimeout: 300 * time.Millisecond})

	start := time.Now()
	res, err := tr.Deliver(context.Background(), newRequest(rcv.URL))
	elapsed := time.Since(start)
	if err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver = %+v, %v; the 200 already arrived, so it stands", res, err)
	}
	if elapsed > 2500*time.Millisecond {
		t.Errorf("Deliver took %s, want at most the request timeout plus about a second", elapsed)
	}
}

func TestDeliver_StopsReadingAnEndlessBodyAtTheLimit(t *testing.T) {
	chunk := make([]byte, 32<<10)
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	tr := newTransport(t, webhook.Config{MaxResponseBody: 1 << 10})

	start := time.Now()
	res, err := tr.Deliver(context.Background(), newRequest(rcv.URL))
	if err != nil || res.Outcome != transport.Failed || res.Message != "HTTP 500" {
		t.Fatalf("Deliver = %+v, %v; want Failed HTTP 500", res, err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("Deliver took %s reading a body it should have cut off", elapsed)
	}
}

func TestDeliver_ReturnsPromptlyWhenTheCallerCancels(t *testing.T) {
	rcv := stalling(t)
	tr := newTransport(t, webhook.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan error, 1)
	go func() {
		_, err := tr.Deliver(ctx, newRequest(rcv.URL))
		done <- err
	}()
	<-rcv.hits // the request is in flight
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Deliver error = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Deliver did not return within 2s of cancellation")
	}
}
