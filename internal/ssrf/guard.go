package ssrf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jetrelay/jetrelay/transport"
)

// Resolver looks up a host's addresses; *net.Resolver is one. Tests map
// names to addresses with their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Source reads the stored policy: the raw config:webhook-security value and
// found=true, or found=false when no policy is stored. An error means the
// store could not be read, except one wrapping ErrUnusable.
type Source func(ctx context.Context) (raw []byte, found bool, err error)

// ErrUnusable is what a Source wraps when a policy is stored but cannot be
// read as one (a key of another type, a value over the size bound): like an
// unparsable value, it leaves no policy in force.
var ErrUnusable = errors.New("ssrf: stored policy unusable")

// Config configures a Guard.
type Config struct {
	// Source reads the stored policy. Nil means none is ever stored: the
	// defaults apply.
	Source Source
	// AllowCIDRs are the operator's allow-list: addresses in them may be
	// dialled even when the policy blocks their range (an internal receiver,
	// a test server on 127.0.0.1).
	AllowCIDRs []netip.Prefix
	// AllowHTTP lets plain http:// URLs through when the policy requires
	// https.
	AllowHTTP bool
	// Resolver resolves host names. Default net.DefaultResolver.
	Resolver Resolver
	// Dial connects to a vetted ip:port. Default a net.Dialer with 30s
	// keep-alive.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Logger receives policy changes and refresh failures. Default
	// slog.Default().
	Logger *slog.Logger
}

// Guard enforces the current policy at dial time. It is safe for concurrent
// use; Refresh swaps the policy in while sends go on.
type Guard struct {
	cfg   Config
	state atomic.Pointer[state]
}

// state is what the Guard currently knows: a policy, or why it has none.
type state struct {
	policy *Policy
	err    error  // non-nil: no usable policy, sends wait
	raw    []byte // the stored value it came from, to log changes only
	found  bool
}

// errNotLoaded is the state before the first successful Refresh.
var errNotLoaded = errors.New("ssrf: destination policy not loaded yet")

// New returns a Guard with no policy loaded: sends fail (retryably) until
// the first successful Refresh.
func New(cfg Config) *Guard {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	g := &Guard{cfg: cfg}
	g.state.Store(&state{err: errNotLoaded})
	return g
}

// Refresh reads the stored policy and puts it in force. When the store
// cannot be read, the policy in force stays (a Redis blip must not open or
// close anything). When the stored value is unreadable, no policy is in
// force and sends are retried until it is fixed, as upstream leaves such
// deliveries unacknowledged: guessing either way could open a door the
// operator meant to close.
func (g *Guard) Refresh(ctx context.Context) error {
	var raw []byte
	found := false
	if g.cfg.Source != nil {
		var err error
		if raw, found, err = g.cfg.Source(ctx); err != nil && !errors.Is(err, ErrUnusable) {
			return fmt.Errorf("ssrf: read %s: %w", Key, err)
		} else if err != nil {
			g.setUnreadable(err)
			return nil
		}
	}
	old := g.state.Load()
	if old.err == nil && old.found == found && bytes.Equal(old.raw, raw) {
		return nil
	}
	if !found {
		g.state.Store(&state{policy: DefaultPolicy()})
		g.cfg.Logger.Info("SSRF policy: none stored, restrictive defaults apply", "key", Key)
		return nil
	}
	p, err := ParsePolicy(raw)
	if err != nil {
		g.setUnreadable(err)
		return nil
	}
	g.state.Store(&state{policy: p, raw: raw, found: true})
	g.cfg.Logger.Info("SSRF policy loaded", "key", Key, "address_check", p.checkAddrs, "blocked_ranges", len(p.blocked),
		"allowed_url_patterns", len(p.patterns), "allow_http", p.allowHTTP)
	if !p.checkAddrs {
		g.cfg.Logger.Warn("SSRF address check is OFF (empty blocked_cidr_ranges and allow_http true): deliveries may reach private and internal addresses")
	}
	for _, n := range p.Notes {
		g.cfg.Logger.Warn("SSRF policy: "+n, "key", Key)
	}
	return nil
}

// setUnreadable takes the policy out of force: sends wait until it is fixed.
// It logs once per distinct cause, not on every refresh.
func (g *Guard) setUnreadable(cause error) {
	err := fmt.Errorf("%s is unreadable, deliveries wait until it is fixed: %w", Key, cause)
	if old := g.state.Load(); old.err != nil && old.err.Error() == err.Error() {
		return
	}
	g.state.Store(&state{err: err})
	g.cfg.Logger.Error("SSRF policy unreadable", "key", Key, "err", err)
}

// Run refreshes the policy every interval until ctx is done, so a changed
// policy takes effect without a restart.
func (g *Guard) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := g.Refresh(ctx)
		switch {
		case err != nil && err.Error() != lastErr && ctx.Err() == nil:
			g.cfg.Logger.Warn("SSRF policy refresh failed; the policy in force stays", "err", err)
			lastErr = err.Error()
		case err == nil:
			lastErr = ""
		}
	}
}

// Policy returns the policy in force, or the retryable error that says why
// there is none.
func (g *Guard) Policy() (*Policy, error) {
	s := g.state.Load()
	return s.policy, s.err
}

// Ready reports whether a policy is in force, for a readiness probe.
func (g *Guard) Ready(context.Context) error {
	_, err := g.Policy()
	return err
}

// CheckURL checks raw against the policy's URL rules (https required,
// allowed patterns). A refusal wraps transport.Blocked; no policy in force
// is a plain, retryable error.
func (g *Guard) CheckURL(raw string) error {
	p, err := g.Policy()
	if err != nil {
		return err
	}
	if err := p.CheckURL(raw, g.cfg.AllowHTTP); err != nil {
		return transport.Blocked(err)
	}
	return nil
}

// CheckAddr checks one address: allowed when it is on the operator's
// allow-list or outside every blocked range. A refusal wraps
// transport.Blocked.
func (g *Guard) CheckAddr(a netip.Addr) error {
	p, err := g.Policy()
	if err != nil {
		return err
	}
	return g.checkAddr(p, a)
}

func (g *Guard) checkAddr(p *Policy, a netip.Addr) error {
	plain := a.WithZone("").Unmap()
	for _, pfx := range g.cfg.AllowCIDRs {
		if pfx.Contains(plain) {
			return nil
		}
	}
	if pfx, blocked := p.BlockedBy(a); blocked {
		return transport.Blocked(&BlockedError{Reason: fmt.Sprintf("resolves to blocked IP %s (in %s)", plain, pfx)})
	}
	return nil
}

// minDialShare is the least time one of several addresses gets to connect
// before the next is tried.
const minDialShare = 2 * time.Second

// DialContext is a dialer for transports: it resolves address's host with
// the Guard's resolver, refuses the connection if any of its addresses is
// blocked (as admin does), and otherwise connects to the vetted addresses in
// turn, by IP, so that nothing resolves the name again between check and
// connect. It runs on every connection, so on every attempt.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	p, err := g.Policy()
	if err != nil {
		return nil, err
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("ssrf: dial %s: %w", network, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("ssrf: dial %s: invalid port", network)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lookup := "ip"
		switch network {
		case "tcp4", "udp4":
			lookup = "ip4"
		case "tcp6", "udp6":
			lookup = "ip6"
		}
		if addrs, err = g.cfg.Resolver.LookupNetIP(ctx, lookup, host); err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	for _, a := range addrs {
		if err := g.checkAddr(p, a); err != nil {
			return nil, err
		}
	}
	var firstErr error
	for i, a := range addrs {
		dctx, cancel := ctx, context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok && i < len(addrs)-1 {
			share := max(time.Until(deadline)/time.Duration(len(addrs)-i), minDialShare)
			dctx, cancel = context.WithTimeout(ctx, share)
		}
		conn, err := g.cfg.Dial(dctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		cancel()
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}
