package natsink_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/ssrf"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/natsink"
	"github.com/jetrelay/jetrelay/transport/transporttest"
)

// namedResolver answers one name with 127.0.0.1; no real DNS is involved.
type namedResolver struct{ name string }

func (r namedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host != r.name {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// guard returns an SSRF guard with its policy loaded from source (nil: the
// restrictive defaults).
func guard(t *testing.T, cfg ssrf.Config) *ssrf.Guard {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := ssrf.New(cfg)
	if err := g.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g
}

// loopbackServer starts a NATS server on 127.0.0.1 and returns it with its
// host:port.
func loopbackServer(t *testing.T) (*natsserver.Server, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: t.TempDir(), Listen: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv, addr
}

// connections is how many clients the server has ever accepted.
func connections(t *testing.T, srv *natsserver.Server) uint64 {
	t.Helper()
	v, err := srv.NATS().Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	return v.TotalConnections
}

// openThroughDriver opens the registered nats driver the way the host does,
// offering dial under transport.DialerKey.
func openThroughDriver(t *testing.T, dial transport.DialFunc) transport.Transport {
	t.Helper()
	reg, err := transport.OpenRegistry(context.Background(), transport.Env{Shared: map[any]any{transport.DialerKey{}: dial}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	tr, err := reg.Lookup("nats:///x")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestDeliver_RefusesANamedServerTheSSRFPolicyBlocksAndNeverConnects(t *testing.T) {
	srv, addr := loopbackServer(t)
	cases := []struct {
		name string
		url  string
		g    *ssrf.Guard
	}{
		{"a literal loopback address", "nats://" + addr + "/orders.events", guard(t, ssrf.Config{})},
		{"a name resolving to loopback", "nats://nats.internal.test:" + portOf(addr) + "/orders.events",
			guard(t, ssrf.Config{Resolver: namedResolver{"nats.internal.test"}})},
		{"credentials do not change the check", "nats://alice:pw@" + addr + "/orders.events", guard(t, ssrf.Config{})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := openThroughDriver(t, tc.g.DialContext)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := tr.Deliver(ctx, transporttest.NewRequest(tc.url, "blocked"))
			if !errors.Is(err, transport.ErrBlocked) || !errors.Is(err, transport.ErrPermanent) {
				t.Fatalf("Deliver error = %v, want a blocked (permanent) refusal", err)
			}
			if !strings.HasPrefix(err.Error(), "Blocked by SSRF policy: resolves to blocked IP 127.0.0.1 (in 127.0.0.0/8)") {
				t.Errorf("message = %q, want the SSRF refusal naming the address", err)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("message %q quotes the URL's password", err)
			}
		})
	}
	if n := connections(t, srv); n != 0 {
		t.Errorf("the blocked server accepted %d connections, want none", n)
	}
}

func TestDeliver_ReachesALoopbackServerOnTheOperatorAllowList(t *testing.T) {
	_, addr := loopbackServer(t)
	sub, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	inbox, err := sub.SubscribeSync("orders.events")
	if err != nil || sub.Flush() != nil {
		t.Fatal(err)
	}
	g := guard(t, ssrf.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Resolver: namedResolver{"nats.internal.test"}})
	tr := openThroughDriver(t, g.DialContext)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := transporttest.NewRequest("nats://nats.internal.test:"+portOf(addr)+"/orders.events", "allowed")
	if res, err := tr.Deliver(ctx, req); err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver = %+v, %v; want Delivered", res, err)
	}
	if _, err := inbox.NextMsgWithContext(ctx); err != nil {
		t.Fatalf("the allowed server's subscriber got nothing: %v", err)
	}
}

func TestDeliver_RefusesAServerWhoseReconnectsThePolicyNowBlocks(t *testing.T) {
	srv, addr := loopbackServer(t)
	// The unsafe-off policy first (address check off), then none stored:
	// the restrictive defaults, as if an operator had tightened it.
	var tightened atomic.Bool
	g := guard(t, ssrf.Config{Source: func(context.Context) ([]byte, bool, error) {
		if tightened.Load() {
			return nil, false, nil
		}
		return []byte(`{"blocked_cidr_ranges":[],"allow_http":true}`), true, nil
	}})
	tr, err := natsink.New(natsink.Config{Dial: g.DialContext, ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "nats://" + addr + "/orders.events"
	if res, err := tr.Deliver(ctx, transporttest.NewRequest(url, "first")); err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("first Deliver = %+v, %v; want Delivered", res, err)
	}
	tightened.Store(true)
	if err := g.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown() // the connection drops; its reconnects meet the new policy
	for {
		// Short attempts, as the engine's: a publish into the reconnect
		// buffer waits for its flush until the attempt's deadline.
		actx, acancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := tr.Deliver(actx, transporttest.NewRequest(url, "again"))
		acancel()
		if errors.Is(err, transport.ErrBlocked) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Deliver kept answering %v; want the SSRF refusal once reconnects are refused", err)
		}
	}
}

func portOf(hostport string) string {
	_, port, _ := net.SplitHostPort(hostport)
	return port
}
