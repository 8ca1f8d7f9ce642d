package webhook_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

// rawReceiver is a TCP server on loopback whose every connection is handled
// by serve, for receivers no well-behaved HTTP server would be. Connections
// are closed when the test ends.
func rawReceiver(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				go func() { <-done; c.Close() }()
				serve(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/hook"
}

// readRequestHead consumes the request line and headers (not the body).
func readRequestHead(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil || line == "\r\n" {
			return
		}
	}
}

// drip writes s one byte at a time, every 10ms, then keeps writing filler
// header lines the same way until the connection breaks.
func drip(c net.Conn, s string) {
	for i := 0; ; i++ {
		b := byte('a')
		if i < len(s) {
			b = s[i]
		} else if (i-len(s))%8 == 7 {
			b = '\n'
		}
		if _, err := c.Write([]byte{b}); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond) // the pace is the point of this receiver
	}
}

func TestDeliver_HostileReceiversCannotHoldTheWorkerPastTheDeadline(t *testing.T) {
	const requestTimeout = 400 * time.Millisecond
	cases := []struct {
		name  string
		serve func(net.Conn)
		want  string // substring of the error
	}{
		{"status line and headers dripped a byte at a time", func(c net.Conn) {
			readRequestHead(c)
			drip(c, "HTTP/1.1 200 OK\r\nX-Slow: ")
		}, "request timed out"},
		{"headers larger than the bound", func(c net.Conn) {
			readRequestHead(c)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 1<<20)+"\r\n\r\n")
		}, "exceeded"},
		{"header lines streamed without end", func(c net.Conn) {
			readRequestHead(c)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			for {
				if _, err := io.WriteString(c, "X-More: yes\r\n"); err != nil {
					return
				}
			}
		}, "exceeded"},
		{"accepts and never says a word", func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }, "request timed out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := rawReceiver(t, tc.serve)
			tr := newTransport(t, webhook.Config{RequestTimeout: requestTimeout, MaxResponseHeader: 16 << 10})
			start := time.Now()
			res, err := tr.Deliver(context.Background(), newRequest(url))
			elapsed := time.Since(start)
			if err == nil {
				t.Fatalf("Deliver = %+v, nil; want a failed attempt", res)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to mention %q", err, tc.want)
			}
			if errors.Is(err, transport.ErrPermanent) {
				t.Errorf("error %v is permanent; a misbehaving receiver may recover, so it must be retried", err)
			}
			if elapsed > requestTimeout+time.Second {
				t.Errorf("Deliver took %s, want at most the request timeout %s (plus slack)", elapsed, requestTimeout)
			}
		})
	}
}

func TestDeliver_GivesUpOnAStalledTLSHandshakeAtTheConnectTimeout(t *testing.T) {
	url := rawReceiver(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }) // reads the ClientHello, never answers
	tr := newTransport(t, webhook.Config{ConnectTimeout: 300 * time.Millisecond, RequestTimeout: 10 * time.Second})
	start := time.Now()
	res, err := tr.Deliver(context.Background(), newRequest(strings.Replace(url, "http://", "https://", 1)))
	if err == nil {
		t.Fatalf("Deliver = %+v, nil; want a handshake timeout", res)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Deliver took %s, want about the 300ms connect timeout", elapsed)
	}
	var to timeouter
	if !errors.As(err, &to) || !to.Timeout() {
		t.Errorf("error %q does not report a timeout", err)
	}
}

func TestDeliver_RefusesTLSOlderThan1_2EvenWhenTheCallerAllowsIt(t *testing.T) {
	rcv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	rcv.TLS = &tls.Config{MaxVersion: tls.VersionTLS11}
	rcv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	rcv.StartTLS()
	defer rcv.Close()
	trusted := rcv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	trusted.MinVersion = tls.VersionTLS10 // a careless caller's config

	res, err := newTransport(t, webhook.Config{TLSClientConfig: trusted}).Deliver(context.Background(), newRequest(rcv.URL))
	if err == nil {
		t.Fatalf("Deliver = %+v, nil; want a refused TLS 1.1 handshake", res)
	}
	if !strings.HasPrefix(err.Error(), "TLS handshake failed") && !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("error = %q, want a TLS version failure", err)
	}
}
