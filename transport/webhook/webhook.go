package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// DefaultUserAgent starts with cycles-server-events/ because receivers may
// check for the reference service's agent, and names jetrelay so operators
// can tell which sender they are looking at.
const DefaultUserAgent = "cycles-server-events/0.1.25.12 (jetrelay)"

// Defaults applied by New to zero Config fields.
const (
	DefaultConnectTimeout      = 5 * time.Second
	DefaultRequestTimeout      = 30 * time.Second
	DefaultMaxResponseBody     = 64 << 10
	DefaultMaxIdleConnsPerHost = 256
	DefaultMaxResponseHeader   = 64 << 10
)

// bodyGrace is how long past RequestTimeout an attempt may spend reading the
// response body. The answer is already known by then; the body is read only
// so the connection can be reused, and a receiver that drips it forever must
// not hold the worker.
const bodyGrace = time.Second

// Config configures a Transport. The zero value of every field means its
// default.
type Config struct {
	// UserAgent is sent as User-Agent. Default DefaultUserAgent.
	UserAgent string
	// ConnectTimeout bounds dialling and the TLS handshake. Default 5s.
	ConnectTimeout time.Duration
	// RequestTimeout bounds an attempt from the start of the send until the
	// response headers, like the reference service's request timeout.
	// Reading the (bounded) response body may take a second more. Default 30s.
	RequestTimeout time.Duration
	// MaxResponseBody is how many bytes of a response body are read (and
	// discarded) so that the connection can be reused; a longer body closes
	// the connection instead. Default 64 KiB.
	MaxResponseBody int64
	// MaxResponseHeader bounds the bytes of response headers read; a
	// receiver sending more gets no further and the attempt fails (and is
	// retried). Default 64 KiB.
	MaxResponseHeader int64
	// MaxIdleConnsPerHost bounds the kept-alive connections per receiver.
	// Default 256: Go's default of 2 halves throughput under concurrency.
	MaxIdleConnsPerHost int
	// TLSClientConfig, if set, is used for https receivers (e.g. to trust a
	// test CA). Its ALPN protocols are replaced by http/1.1, and a
	// MinVersion below TLS 1.2 is raised to it.
	TLSClientConfig *tls.Config
	// DialContext, if set, opens connections instead of a net.Dialer, e.g. to
	// refuse private addresses. ConnectTimeout still applies. An error it
	// marks transport.Permanent stays permanent.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// CheckURL, if set, vets each attempt's URL before anything is sent,
	// e.g. a destination policy's https and allowed-pattern rules. Its error
	// is returned as it is: a transport.Blocked or transport.Permanent error
	// stays so, anything else is retried.
	CheckURL func(rawURL string) error
}

// withDefaults validates c and fills in its zero fields.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.ConnectTimeout < 0:
		return c, fmt.Errorf("webhook: ConnectTimeout must not be negative, got %s", c.ConnectTimeout)
	case c.RequestTimeout < 0:
		return c, fmt.Errorf("webhook: RequestTimeout must not be negative, got %s", c.RequestTimeout)
	case c.MaxResponseBody < 0:
		return c, fmt.Errorf("webhook: MaxResponseBody must not be negative, got %d", c.MaxResponseBody)
	case c.MaxResponseHeader < 0:
		return c, fmt.Errorf("webhook: MaxResponseHeader must not be negative, got %d", c.MaxResponseHeader)
	case c.MaxIdleConnsPerHost < 0:
		return c, fmt.Errorf("webhook: MaxIdleConnsPerHost must not be negative, got %d", c.MaxIdleConnsPerHost)
	case c.UserAgent != "" && !proto.ValidHeaderValue(c.UserAgent):
		return c, errors.New("webhook: UserAgent contains characters not allowed in a header value")
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MaxResponseBody == 0 {
		c.MaxResponseBody = DefaultMaxResponseBody
	}
	if c.MaxResponseHeader == 0 {
		c.MaxResponseHeader = DefaultMaxResponseHeader
	}
	if c.MaxIdleConnsPerHost == 0 {
		c.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	return c, nil
}

// Transport delivers over HTTP/1.1. It is safe for concurrent use and keeps
// connections alive across deliveries; call Close when done with it.
type Transport struct {
	cfg    Config
	conns  *http.Transport
	client *http.Client
}

var _ transport.Transport = (*Transport)(nil)

// New returns a Transport for cfg, or an error if cfg is invalid.
func New(cfg Config) (*Transport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	connectTimeout := cfg.ConnectTimeout
	var tlsConfig *tls.Config
	if cfg.TLSClientConfig != nil {
		tlsConfig = cfg.TLSClientConfig.Clone()
	} else {
		tlsConfig = &tls.Config{}
	}
	// An h2-capable ALPN offer would let the server pick HTTP/2; the
	// reference fixed dropped bodies by forcing HTTP/1.1 (contract §8.1).
	tlsConfig.NextProtos = []string{"http/1.1"}
	tlsConfig.MinVersion = max(tlsConfig.MinVersion, tls.VersionTLS12)
	var protocols http.Protocols
	protocols.SetHTTP1(true)

	ht := &http.Transport{
		// No proxy: a proxy would dial on our behalf and bypass DialContext,
		// and with it any address policy a caller enforces there.
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeoutCause(ctx, connectTimeout, errConnectTimeout)
			defer cancel()
			conn, err := dial(ctx, network, addr)
			if err != nil && context.Cause(ctx) == errConnectTimeout {
				return nil, fmt.Errorf("%w: %w", errConnectTimeout, err)
			}
			return conn, err
		},
		TLSClientConfig:        tlsConfig,
		TLSHandshakeTimeout:    cfg.ConnectTimeout,
		ForceAttemptHTTP2:      false,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		Protocols:              &protocols,
		DisableCompression:     true,
		MaxResponseHeaderBytes: cfg.MaxResponseHeader,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
	}
	return &Transport{
		cfg:   cfg,
		conns: ht,
		client: &http.Client{
			Transport: ht,
			// A 3xx is the receiver's answer, not an instruction: following
			// it would send a signed event to an address nobody subscribed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// Close closes the idle kept-alive connections. Deliveries in flight finish.
func (t *Transport) Close() { t.conns.CloseIdleConnections() }

// errConnectTimeout marks a dial that ran out of ConnectTimeout, whichever
// dialer was used.
var errConnectTimeout = errors.New("webhook: connect timed out")

// errRequestTimeout is the cancellation cause of an attempt that ran out of
// time, telling it apart from the caller's own cancellation.
var errRequestTimeout = errors.New("webhook: request timed out")

// Deliver POSTs req and classifies the answer, following the
// transport.Transport contract: a Result and nil error whenever the receiver
// answered; an error (with Result.Latency set) when it did not; a
// transport.Permanent error, before anything is sent, when the URL or a
// custom header can never be sent; CheckURL's or DialContext's error when
// they refuse the destination.
//
// Once the response headers arrived the Result stands, even if reading the
// rest of the body is cut short by the deadline or by ctx.
func (t *Transport) Deliver(ctx context.Context, req *transport.Request) (transport.Result, error) {
	attemptCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	httpReq, lease, err := t.newRequest(attemptCtx, req)
	if err != nil {
		return transport.Result{}, transport.Permanent(err)
	}
	defer lease.release()
	if t.cfg.CheckURL != nil {
		if err := t.cfg.CheckURL(req.URL); err != nil {
			return transport.Result{}, err
		}
	}

	timer := time.AfterFunc(t.cfg.RequestTimeout, func() { cancel(errRequestTimeout) })
	defer timer.Stop()
	start := time.Now()
	resp, err := t.client.Do(httpReq)
	latency := time.Since(start)
	if err != nil {
		return transport.Result{Latency: latency}, t.noAnswer(ctx, attemptCtx, err)
	}
	timer.Reset(time.Until(start.Add(t.cfg.RequestTimeout + bodyGrace)))
	result := classify(resp, latency, time.Now())
	// Errors here only mean the connection is not reused; the answer stands.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, t.cfg.MaxResponseBody))
	_ = resp.Body.Close()
	return result, nil
}
