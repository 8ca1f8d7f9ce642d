package inbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// HeaderAttempt tells the forward target which inbox attempt this is
// (1-based). The target dedupes by X-Cycles-Event-Id, not by this.
const HeaderAttempt = "X-Jetrelay-Inbox-Attempt"

// Forwarder passes one stored event on. It returns nil only when the target
// took the event; any error makes the worker retry it later. Implementations
// are safe for concurrent use.
type Forwarder interface {
	Forward(ctx context.Context, e Event) error
	Close()
}

// forwardedHeaders are the stored headers a forward carries: the identity
// (event id, type, trace, request id, X-Cycles-Signature) and the content
// type. The Standard Webhooks headers are not passed on: their timestamp
// dates the sender's request, which the inbox verified, and a forward
// retried later would carry it past any target's replay tolerance; the
// target verifies X-Cycles-Signature instead.
func forwardedHeaders(e Event) map[string]string {
	out := map[string]string{proto.HeaderContentType: "application/json", HeaderAttempt: strconv.Itoa(e.AttemptCount)}
	for _, name := range receive.IdentityHeaders() {
		if strings.HasPrefix(name, "webhook-") {
			continue
		}
		if v := e.Header.Get(name); v != "" {
			out[name] = v
		}
	}
	if v := e.Header.Get(proto.HeaderContentType); v != "" {
		out[proto.HeaderContentType] = v
	}
	return out
}

// NewForwarder returns the forwarder for target: an http:// or https:// URL
// (POST), or nats://host:port/subject (publish; acknowledged by JetStream
// when a stream captures the subject).
func NewForwarder(target string, timeout time.Duration) (Forwarder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("inbox: forward target: %w", err)
	}
	switch u.Scheme {
	case "http", "https":
		return &httpForwarder{url: target, client: &http.Client{Timeout: timeout}}, nil
	case "nats":
		return newNATSForwarder(u, timeout)
	}
	return nil, fmt.Errorf("inbox: forward target %q: scheme must be http, https or nats", u.Redacted())
}

type httpForwarder struct {
	url    string
	client *http.Client
}

func (f *httpForwarder) Forward(ctx context.Context, e Event) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(e.Body))
	if err != nil {
		return err
	}
	for k, v := range forwardedHeaders(e) {
		req.Header[k] = []string{v} // as stored: traceparent stays lowercase
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

func (f *httpForwarder) Close() { f.client.CloseIdleConnections() }

type natsForwarder struct {
	nc      *nats.Conn
	js      jetstream.JetStream // nil when no stream captures subject
	subject string
}

func newNATSForwarder(u *url.URL, timeout time.Duration) (*natsForwarder, error) {
	subject := strings.TrimPrefix(u.Path, "/")
	if subject == "" || strings.ContainsAny(subject, " \t\r\n*>") {
		return nil, fmt.Errorf("inbox: forward target %q: nats://host:port/<subject> with a literal subject", u.Redacted())
	}
	server := *u
	server.Path, server.RawQuery = "", ""
	nc, err := nats.Connect(server.String(), nats.Timeout(timeout), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("inbox: connect to %s: %w", server.Redacted(), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	f := &natsForwarder{nc: nc, subject: subject}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := js.StreamNameBySubject(ctx, subject); err == nil {
		f.js = js
	}
	return f, nil
}

// Forward publishes through JetStream when a stream captured the subject at
// start, so the stream acknowledges a stored copy (Nats-Msg-Id = event id
// collapses repeats in its window); otherwise it is a core publish flushed to
// the server, which is all core NATS promises.
func (f *natsForwarder) Forward(ctx context.Context, e Event) error {
	m := nats.NewMsg(f.subject)
	m.Data = e.Body
	for k, v := range forwardedHeaders(e) {
		m.Header[k] = []string{v}
	}
	m.Header[jetstream.MsgIDHeader] = []string{e.EventID}
	if f.js == nil {
		if err := f.nc.PublishMsg(m); err != nil {
			return err
		}
		return f.nc.FlushWithContext(ctx)
	}
	_, err := f.js.PublishMsg(ctx, m)
	return err
}

func (f *natsForwarder) Close() { f.nc.Close() }
