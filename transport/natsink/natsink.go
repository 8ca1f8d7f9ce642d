package natsink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/transport"
)

// EngineConn is the transport.Env.Shared key under which the host offers its
// own *nats.Conn for nats:///subject URLs.
type EngineConn struct{}

// Defaults applied by New to zero Config fields.
const (
	DefaultConnectTimeout = 5 * time.Second
	DefaultStreamCacheTTL = 10 * time.Second
)

// Config configures a Transport. The zero value of every field means its
// default.
type Config struct {
	// Conn is the connection nats:///subject URLs publish on (the engine's).
	// Nil: such URLs fail permanently, and only URLs naming a server work.
	Conn *nats.Conn
	// ConnectTimeout bounds connecting to a server a URL names. Default 5s.
	ConnectTimeout time.Duration
	// StreamCacheTTL is how long a subject's stream (or its absence) is
	// remembered. Default 10s.
	StreamCacheTTL time.Duration
	// Dial, if set, opens every connection to a server a URL names, first
	// connects and reconnects alike (the host's SSRF guard). nats.go then
	// resolves nothing itself, so the dialer vets the address it connects
	// to. A refusal wrapped by transport.Blocked fails the delivery as
	// blocked. Nil: plain TCP dials.
	Dial transport.DialFunc
}

func init() { transport.Register("nats", driver{}) }

// driver opens the nats:// transport on the engine's own connection (for
// nats:///subject URLs) with the host's dialer (for URLs naming a server).
type driver struct{}

var _ transport.URLValidator = driver{}

// Open builds the transport.
func (driver) Open(_ context.Context, env transport.Env) (transport.Transport, error) {
	nc, _ := env.Shared[EngineConn{}].(*nats.Conn)
	return New(Config{Conn: nc, Dial: env.Dialer()})
}

// ValidateURL accepts nats:///subject and nats://[user[:password]@]host[:port]/subject
// with a valid subject, the form every send parses.
func (driver) ValidateURL(rawURL string) error {
	_, err := parseTarget(rawURL)
	return err
}

// Transport publishes deliveries to NATS subjects. It is safe for
// concurrent use; Close closes the connections it opened to servers URLs
// name (never the engine's).
type Transport struct {
	cfg Config

	mu      sync.Mutex
	servers map[string]*server // by server URL (credentials included)
	streams map[streamKey]streamEntry
	closed  bool
}

// server is one connection, shared by the deliveries to it.
type server struct {
	ready chan struct{} // closed once conn or err is set
	conn  *nats.Conn
	js    jetstream.JetStream
	err   error
	dial  *policyDialer // nil for the engine's connection or without Config.Dial
}

// policyDialer adapts Config.Dial to nats.go's context-free CustomDialer and
// remembers the latest refusal, which nats.go would otherwise report only
// as a failed connect (or, while reconnecting, not at all).
type policyDialer struct {
	dial    transport.DialFunc
	timeout time.Duration
	blocked atomic.Pointer[error] // the last dial's refusal; nil after a dial that was not refused
}

// Dial implements nats.CustomDialer.
func (d *policyDialer) Dial(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	conn, err := d.dial(ctx, network, address)
	if errors.Is(err, transport.ErrBlocked) {
		d.blocked.Store(&err)
	} else {
		d.blocked.Store(nil)
	}
	return conn, err
}

// refusal returns the last dial's refusal, or nil.
func (d *policyDialer) refusal() error {
	if d == nil {
		return nil
	}
	if p := d.blocked.Load(); p != nil {
		return *p
	}
	return nil
}

type streamKey struct {
	js      jetstream.JetStream
	subject string
}

type streamEntry struct {
	inStream bool
	at       time.Time
}

var _ transport.Transport = (*Transport)(nil)

// New returns a Transport for cfg.
func New(cfg Config) (*Transport, error) {
	if cfg.ConnectTimeout < 0 || cfg.StreamCacheTTL < 0 {
		return nil, errors.New("natsink: timeouts must not be negative")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.StreamCacheTTL == 0 {
		cfg.StreamCacheTTL = DefaultStreamCacheTTL
	}
	t := &Transport{cfg: cfg, servers: make(map[string]*server), streams: make(map[streamKey]streamEntry)}
	if cfg.Conn != nil {
		js, err := jetstream.New(cfg.Conn)
		if err != nil {
			return nil, fmt.Errorf("natsink: %w", err)
		}
		s := &server{ready: make(chan struct{}), conn: cfg.Conn, js: js}
		close(s.ready)
		t.servers[""] = s
	}
	return t, nil
}

// Close closes the connections opened to servers named in URLs.
func (t *Transport) Close() {
	t.mu.Lock()
	t.closed = true
	servers := t.servers
	t.servers = map[string]*server{}
	t.mu.Unlock()
	for key, s := range servers {
		if key == "" {
			continue
		}
		go func() {
			<-s.ready
			if s.conn != nil {
				s.conn.Close()
			}
		}()
	}
}

// Deliver publishes req to the URL's subject and classifies the answer: a
// PubAck (or, without a stream, the server's round trip) is Delivered; a
// JetStream error answer is Failed, or Throttled when the stream is full
// (503); no answer is a retryable error; a URL, subject or header that can
// never be sent is a Permanent error.
func (t *Transport) Deliver(ctx context.Context, req *transport.Request) (transport.Result, error) {
	target, err := parseTarget(req.URL)
	if err != nil {
		return transport.Result{}, transport.Permanent(err)
	}
	msg, err := message(target.subject, req)
	if err != nil {
		return transport.Result{}, transport.Permanent(err)
	}
	start := time.Now()
	s, err := t.server(ctx, target.server)
	if err != nil {
		return transport.Result{Latency: time.Since(start)}, err
	}
	if err := s.dial.refusal(); err != nil && !s.conn.IsConnected() {
		// The server's address moved into a blocked range since the first
		// connect (rebinding, a tightened policy): reconnects are refused.
		return transport.Result{Latency: time.Since(start)}, err
	}
	inStream, err := t.inStream(ctx, s.js, target.subject)
	if err != nil {
		return transport.Result{Latency: time.Since(start)}, noAnswer(ctx, err)
	}
	if !inStream {
		if err := s.conn.PublishMsg(msg); err != nil {
			return transport.Result{Latency: time.Since(start)}, noAnswer(ctx, err)
		}
		// The round trip proves the server took the message. Flush needs a
		// deadline; the engine always sets one, a bare caller gets one.
		fctx, cancel := ctx, context.CancelFunc(func() {})
		if _, ok := ctx.Deadline(); !ok {
			fctx, cancel = context.WithTimeout(ctx, t.cfg.ConnectTimeout)
		}
		err := s.conn.FlushWithContext(fctx)
		cancel()
		if err != nil {
			return transport.Result{Latency: time.Since(start)}, noAnswer(ctx, err)
		}
		return transport.Result{Outcome: transport.Delivered, Latency: time.Since(start)}, nil
	}
	_, err = s.js.PublishMsg(ctx, msg)
	latency := time.Since(start)
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return transport.Result{Outcome: transport.Delivered, Latency: latency}, nil
	case errors.As(err, &apiErr):
		r := transport.Result{Outcome: transport.Failed, StatusCode: apiErr.Code, Latency: latency,
			Message: fmt.Sprintf("NATS %d: %s", apiErr.Code, apiErr.Description), Reason: refusalReason(apiErr)}
		if apiErr.Code == 503 {
			// A full stream with DiscardNew, or JetStream busy: slow down.
			r.Outcome = transport.Throttled
		}
		return r, nil
	}
	return transport.Result{Latency: latency}, noAnswer(ctx, err)
}

// refusalReason names JetStream's refusal for metrics (Result.Reason).
func refusalReason(e *jetstream.APIError) string {
	switch {
	case e.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return "nats_message_too_large"
	case e.ErrorCode == jsErrCodeStreamStoreFailed && strings.Contains(e.Description, "exceeded"):
		// A stream at a limit (max msgs, bytes, per subject) with DiscardNew.
		return "nats_stream_full"
	case e.Code == 503:
		return "nats_unavailable"
	}
	return "nats_refused"
}

// jsErrCodeStreamStoreFailed is nats-server's JSStreamStoreFailedF, which
// jetstream does not export: "maximum messages exceeded" and its kin.
const jsErrCodeStreamStoreFailed jetstream.ErrorCode = 10077

// noAnswer keeps the caller's cancellation visible to errors.Is.
func noAnswer(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("natsink: no answer: %w (%v)", ctx.Err(), err)
	}
	return fmt.Errorf("natsink: no answer: %w", err)
}

// server returns the connection for key, connecting on first use. A
// connection attempt outlives a caller that gives up (it is bounded by
// ConnectTimeout) so that the next delivery can use it.
func (t *Transport) server(ctx context.Context, key string) (*server, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.New("natsink: transport closed")
	}
	s, ok := t.servers[key]
	if !ok {
		if key == "" {
			t.mu.Unlock()
			return nil, transport.Permanent(errors.New("natsink: nats:///subject needs the engine's NATS connection, which this process does not offer"))
		}
		s = &server{ready: make(chan struct{})}
		t.servers[key] = s
		go t.connect(key, s)
	}
	t.mu.Unlock()
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("natsink: connect abandoned: %w", ctx.Err())
	}
	if s.err != nil {
		return nil, s.err
	}
	return s, nil
}

func (t *Transport) connect(key string, s *server) {
	defer close(s.ready)
	opts := []nats.Option{nats.Name("jetrelay-natsink"), nats.Timeout(t.cfg.ConnectTimeout),
		nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	if t.cfg.Dial != nil {
		// Every dial, to servers the named one advertises too, goes through
		// the policy; nats.go must not resolve the name itself, or the
		// dialer would see an address instead of the host it has to vet.
		s.dial = &policyDialer{dial: t.cfg.Dial, timeout: t.cfg.ConnectTimeout}
		opts = append(opts, nats.SetCustomDialer(s.dial), nats.SkipHostLookup())
	}
	nc, err := nats.Connect(key, opts...)
	if err == nil {
		s.js, err = jetstream.New(nc)
	}
	if err != nil {
		// Forget the failure so the next delivery tries again. The error
		// never quotes the URL: it may carry a password.
		t.mu.Lock()
		if t.servers[key] == s {
			delete(t.servers, key)
		}
		t.mu.Unlock()
		if nc != nil {
			nc.Close()
		}
		if blocked := s.dial.refusal(); blocked != nil {
			s.err = blocked // "Blocked by SSRF policy: ...", as for a webhook
			return
		}
		s.err = fmt.Errorf("natsink: cannot connect to the NATS server: %s", connectReason(err))
		return
	}
	s.conn = nc
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		nc.Close()
	}
}

func connectReason(err error) string {
	switch {
	case errors.Is(err, nats.ErrTimeout):
		return "timed out"
	case errors.Is(err, nats.ErrNoServers):
		return "no server reachable"
	case errors.Is(err, nats.ErrAuthorization):
		return "authorization violation"
	}
	return "connection failed"
}

// inStream reports whether subject is captured by a JetStream stream,
// remembering the answer for StreamCacheTTL.
func (t *Transport) inStream(ctx context.Context, js jetstream.JetStream, subject string) (bool, error) {
	k := streamKey{js, subject}
	t.mu.Lock()
	e, ok := t.streams[k]
	t.mu.Unlock()
	if ok && time.Since(e.at) < t.cfg.StreamCacheTTL {
		return e.inStream, nil
	}
	_, err := js.StreamNameBySubject(ctx, subject)
	switch {
	case err == nil:
		e = streamEntry{inStream: true, at: time.Now()}
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		e = streamEntry{inStream: false, at: time.Now()}
	default:
		return false, err
	}
	t.mu.Lock()
	if len(t.streams) > 10000 {
		clear(t.streams) // bounded: subjects come from subscriptions
	}
	t.streams[k] = e
	t.mu.Unlock()
	return e.inStream, nil
}

// target is a parsed nats:// URL.
type target struct {
	server  string // "" for the engine's connection, else nats://[userinfo@]host:port
	subject string
}

// parseTarget reads nats:///subject or nats://[user[:password]@]host[:port]/subject.
// Errors never quote the URL: it may carry a password.
func parseTarget(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, errors.New("natsink: invalid subscription URL: it does not parse as a URL")
	}
	if !strings.EqualFold(u.Scheme, "nats") {
		return target{}, fmt.Errorf("natsink: subscription URL scheme must be nats, got %q", u.Scheme)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return target{}, errors.New("natsink: subscription URL must not have a query or fragment")
	}
	subject := strings.TrimPrefix(u.Path, "/")
	if err := checkSubject(subject); err != nil {
		return target{}, err
	}
	t := target{subject: subject}
	if u.Host != "" {
		if u.Hostname() == "" {
			return target{}, errors.New("natsink: subscription URL has no host")
		}
		srv := url.URL{Scheme: "nats", User: u.User, Host: u.Host}
		t.server = srv.String()
	} else if u.User != nil {
		return target{}, errors.New("natsink: credentials need a host in the subscription URL")
	}
	return t, nil
}

// checkSubject accepts a publishable subject: dot-separated non-empty
// tokens, no wildcards, no whitespace or control characters.
func checkSubject(s string) error {
	if s == "" {
		return errors.New("natsink: subscription URL has no subject (nats://host/subject)")
	}
	if len(s) > 1024 {
		return errors.New("natsink: subject is longer than 1024 bytes")
	}
	for _, tok := range strings.Split(s, ".") {
		switch {
		case tok == "":
			return errors.New("natsink: subject has an empty token")
		case tok == "*" || tok == ">":
			return errors.New("natsink: subject must not contain wildcards")
		}
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return errors.New("natsink: subject contains whitespace or a control character")
		}
	}
	return nil
}

// message builds the NATS message: the stored event as the payload,
// transport.IdentityHeaders and the custom headers by the webhook's names,
// Nats-Msg-Id for JetStream dedup.
func message(subject string, req *transport.Request) (*nats.Msg, error) {
	m := nats.NewMsg(subject)
	m.Data = req.Body
	identity, err := transport.IdentityHeaders(req)
	if err != nil {
		return nil, fmt.Errorf("natsink: %w", err)
	}
	custom, err := transport.CustomHeaders(req, natsReserved)
	if err != nil {
		return nil, fmt.Errorf("natsink: %w", err)
	}
	// Set directly: nats.Header.Set would canonicalise traceparent.
	for _, h := range append(identity, custom...) {
		m.Header[h.Name] = []string{h.Value}
	}
	if req.EventID != "" {
		m.Header[jetstream.MsgIDHeader] = []string{req.EventID}
	}
	return m, nil
}

// natsReserved reports the headers NATS and JetStream interpret themselves.
func natsReserved(name string) bool { return strings.HasPrefix(strings.ToLower(name), "nats-") }
