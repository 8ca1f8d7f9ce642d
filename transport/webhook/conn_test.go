package webhook_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

func TestDeliver_SpeaksHTTP1EvenWhenTheReceiverOffersHTTP2(t *testing.T) {
	protos := make(chan int, 2)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.ProtoMajor
		w.WriteHeader(http.StatusOK)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	// The server really does speak HTTP/2 to a client that asks for it.
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if p := <-protos; p != 2 {
		t.Fatalf("control request used HTTP/%d, want 2: the test would prove nothing", p)
	}

	tlsConfig := srv.Client().Transport.(*http.Transport).TLSClientConfig
	tr := newTransport(t, webhook.Config{TLSClientConfig: tlsConfig})
	res, err := tr.Deliver(context.Background(), newRequest(srv.URL))
	if err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
	if p := <-protos; p != 1 {
		t.Errorf("delivery used HTTP/%d, want HTTP/1.1", p)
	}
}

func TestDeliver_FailsOnAnUntrustedCertificateWithoutSending(t *testing.T) {
	rcv := httptest.NewUnstartedServer(nil)
	var hits atomic.Int32
	rcv.Config.Handler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) })
	rcv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	rcv.StartTLS()
	defer rcv.Close()
	tr := newTransport(t, webhook.Config{}) // does not trust the test CA

	res, err := tr.Deliver(context.Background(), newRequest(rcv.URL))
	if err == nil {
		t.Fatalf("Deliver = %+v, nil; want a TLS error", res)
	}
	if !strings.HasPrefix(err.Error(), "TLS handshake failed: ") {
		t.Errorf("error = %q, want a TLS handshake failure", err)
	}
	if hits.Load() != 0 {
		t.Error("the handler ran although the certificate was not trusted")
	}
}

func TestDeliver_IsRaceFreeAndReusesConnectionsUnderConcurrency(t *testing.T) {
	const workers, perWorker = 50, 20
	var opened, closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr, err := webhook.New(webhook.Config{})
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	var failures atomic.Int32
	for range workers {
		wg.Go(func() {
			for range perWorker {
				req := newRequest(srv.URL)
				req.Headers = map[string]string{"X-Worker": "w"}
				if res, err := tr.Deliver(context.Background(), req); err != nil || res.Outcome != transport.Delivered {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d of %d deliveries failed", n, workers*perWorker)
	}
	t.Logf("%d deliveries over %d connections", workers*perWorker, opened.Load())
	if n := opened.Load(); n > 2*workers {
		t.Errorf("opened %d connections for %d deliveries by %d workers: connections are not reused", n, workers*perWorker, workers)
	}

	tr.Close()
	deadline := time.Now().Add(2 * time.Second)
	for closed.Load() < opened.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if c, o := closed.Load(), opened.Load(); c != o {
		t.Errorf("after Close, %d of %d idle connections are still open", o-c, o)
	}
}

// writeCounter counts the writes made on the connections it dialled.
type writeCounter struct {
	net.Conn
	writes *atomic.Int32
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func TestDeliver_SendsASmallEventInOneWriteAndALargeOneWhole(t *testing.T) {
	// A receiver sees a typical event arrive as one segment: headers and
	// body in one write, not the headers flushed on their own first.
	rcv := newReceiver(t, nil)
	var writes atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: c, writes: &writes}, nil
	}
	tr := newTransport(t, webhook.Config{DialContext: dial})

	for i, size := range []int{1 << 10, 60 << 10, 1 << 20} {
		req := newRequest(rcv.URL)
		req.Body = bytes.Repeat([]byte{'x'}, size)
		before := writes.Load()
		if res, err := tr.Deliver(context.Background(), req); err != nil || res.Outcome != transport.Delivered {
			t.Fatalf("Deliver of %d bytes = %+v, %v", size, res, err)
		}
		n := writes.Load() - before
		if size == 1<<10 && n != 1 {
			t.Errorf("a %d-byte event went out in %d writes, want 1", size, n)
		}
		if got := rcv.requests()[i].body; !bytes.Equal(got, req.Body) {
			t.Errorf("receiver got %d bytes of a %d-byte event, or other bytes", len(got), size)
		}
	}
}
