package sqs_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/ssrf"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/sqs"
	"github.com/jetrelay/jetrelay/transport/transporttest"
)

// awsHost is the endpoint the SDK dials for queues in us-east-1.
const awsHost = "sqs.us-east-1.amazonaws.com"

// loopbackDNS answers awsHost with 127.0.0.1, as a hostile or split-horizon
// resolver might; every other name does not exist. No real DNS is involved.
type loopbackDNS struct{}

func (loopbackDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host != awsHost {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// countingListener accepts TCP connections on 127.0.0.1, counts them and
// closes them at once.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), accepted
}

// loadedGuard is an SSRF guard with the restrictive defaults loaded, whose
// vetted dials go to redirect instead of the vetted address's port 443.
func loadedGuard(t *testing.T, cfg ssrf.Config, redirect string) *ssrf.Guard {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, redirect)
	}
	g := ssrf.New(cfg)
	if err := g.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g
}

// openThroughDriver opens the registered sqs driver the way the host does,
// offering dial under transport.DialerKey and answering settings from env.
func openThroughDriver(t *testing.T, dial transport.DialFunc, env map[string]string) transport.Transport {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-not-logged")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	reg, err := transport.OpenRegistry(context.Background(), transport.Env{
		Getenv: func(k string) string { return env[k] },
		Shared: map[any]any{transport.DialerKey{}: dial},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	tr, err := reg.Lookup("sqs://x/1/q")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func deliver(t *testing.T, tr transport.Transport, url string) (transport.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return tr.Deliver(ctx, transporttest.NewRequest(url, "ssrf"))
}

func TestDeliver_RefusesAnSQSEndpointThatResolvesToABlockedAddressAndNeverConnects(t *testing.T) {
	addr, accepted := countingListener(t)
	g := loadedGuard(t, ssrf.Config{Resolver: loopbackDNS{}}, addr)
	tr := openThroughDriver(t, g.DialContext, map[string]string{sqs.SettingRegion: "us-east-1"})
	_, err := deliver(t, tr, "sqs://"+awsHost+"/000000000000/orders")
	if !errors.Is(err, transport.ErrBlocked) || !errors.Is(err, transport.ErrPermanent) {
		t.Fatalf("Deliver error = %v, want a blocked (permanent) refusal", err)
	}
	if !strings.HasPrefix(err.Error(), "Blocked by SSRF policy: resolves to blocked IP 127.0.0.1 (in 127.0.0.0/8)") {
		t.Errorf("message = %q, want the SSRF refusal naming the address", err)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the blocked address accepted %d connections, want none", n)
	}
}

func TestDeliver_ReachesAnSQSEndpointOnTheOperatorAllowList(t *testing.T) {
	addr, accepted := countingListener(t)
	g := loadedGuard(t, ssrf.Config{Resolver: loopbackDNS{}, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, addr)
	tr := openThroughDriver(t, g.DialContext, map[string]string{sqs.SettingRegion: "us-east-1"})
	// The listener hangs up, so the send fails; what matters is that it
	// was let through to connect.
	if _, err := deliver(t, tr, "sqs://"+awsHost+"/000000000000/orders"); err == nil || errors.Is(err, transport.ErrBlocked) {
		t.Fatalf("Deliver error = %v, want a connection failure, not a refusal", err)
	}
	if accepted.Load() == 0 {
		t.Error("the allowed address was never connected to")
	}
}

func TestDeliver_DialsTheRegionalAWSEndpointNeverTheHostTheQueueURLNames(t *testing.T) {
	var mu sync.Mutex
	var dialled []string
	g := loadedGuard(t, ssrf.Config{Resolver: loopbackDNS{}}, "127.0.0.1:1")
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, address)
		mu.Unlock()
		return g.DialContext(ctx, network, address)
	}
	tr := openThroughDriver(t, dial, map[string]string{sqs.SettingRegion: "us-east-1"})
	_, err := deliver(t, tr, "sqs://127.0.0.1:6379/000000000000/orders")
	if !errors.Is(err, transport.ErrBlocked) {
		t.Fatalf("Deliver error = %v, want the refusal of the endpoint loopbackDNS resolves", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) == 0 || dialled[0] != awsHost+":443" {
		t.Errorf("dialled %v, want only %s:443", dialled, awsHost)
	}
	for _, a := range dialled {
		if strings.HasPrefix(a, "127.0.0.1") {
			t.Errorf("dialled the queue URL's host %s", a)
		}
	}
}

func TestDeliver_DialsTheOperatorsEndpointAsConfigured(t *testing.T) {
	env := testenv.SQS(t)
	createQueue(t, sqsClient(env), "operator-endpoint")
	g := loadedGuard(t, ssrf.Config{}, "127.0.0.1:1") // restrictive defaults: loopback blocked
	tr := openThroughDriver(t, g.DialContext, map[string]string{sqs.SettingRegion: "us-east-1", sqs.SettingEndpoint: env.Endpoint})
	if res, err := deliver(t, tr, env.SubscriptionURL("operator-endpoint")); err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("Deliver through JETRELAY_SQS_ENDPOINT = %+v, %v; want it delivered: the operator chose that endpoint", res, err)
	}
}
