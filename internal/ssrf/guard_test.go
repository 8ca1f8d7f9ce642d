package ssrf_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/ssrf"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

// resolver maps host names to scripted answers: each lookup of a name takes
// the next answer, the last one repeating. No real DNS is involved.
type resolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	lookups map[string]int
}

func newResolver(answers map[string][][]string) *resolver {
	return &resolver{answers: answers, lookups: map[string]int{}}
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.lookups[host], len(seq)-1)
	r.lookups[host]++
	var out []netip.Addr
	for _, s := range seq[i] {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

// recordingDial records the addresses dialled and connects nowhere.
type recordingDial struct {
	mu   sync.Mutex
	addr []string
}

var errNotConnecting = errors.New("test dialer does not connect")

func (d *recordingDial) dial(_ context.Context, _, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addr = append(d.addr, address)
	return nil, errNotConnecting
}

func (d *recordingDial) dialled() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addr...)
}

// staticSource serves one stored policy ("" means none stored).
func staticSource(raw string) ssrf.Source {
	return func(context.Context) ([]byte, bool, error) {
		if raw == "" {
			return nil, false, nil
		}
		return []byte(raw), true, nil
	}
}

func loadedGuard(t *testing.T, cfg ssrf.Config) *ssrf.Guard {
	t.Helper()
	g := ssrf.New(cfg)
	if err := g.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	return g
}

func TestDialContext_RefusesBlockedLiteralsAndNamesResolvingToThem(t *testing.T) {
	var hosts = map[string][][]string{}
	for i, a := range blockedByDefault {
		hosts["h"+string(rune('a'+i))+".example"] = [][]string{{a}}
	}
	hosts["mixed.example"] = [][]string{{"93.184.216.34", "10.0.0.7"}} // one bad address is enough, as in admin
	d := &recordingDial{}
	g := loadedGuard(t, ssrf.Config{Resolver: newResolver(hosts), Dial: d.dial})

	var targets []string
	for _, a := range blockedByDefault {
		ap := netip.MustParseAddr(a)
		targets = append(targets, net.JoinHostPort(ap.String(), "443"))
	}
	for h := range hosts {
		targets = append(targets, net.JoinHostPort(h, "443"))
	}
	for _, target := range targets {
		_, err := g.DialContext(context.Background(), "tcp", target)
		var be *ssrf.BlockedError
		if !errors.Is(err, transport.ErrBlocked) || !errors.Is(err, transport.ErrPermanent) || !errors.As(err, &be) {
			t.Errorf("dial %s: %v, want a blocked error", target, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "Blocked by SSRF policy: resolves to blocked IP ") {
			t.Errorf("dial %s: message %q", target, err)
		}
	}
	if got := d.dialled(); len(got) != 0 {
		t.Errorf("blocked destinations were dialled: %v", got)
	}
}

func TestDialContext_DialsTheVettedAddressNotTheNameSoRebindingCannotSlipIn(t *testing.T) {
	// The name first resolves to a public address (as when admin validated
	// it), then to the metadata service.
	r := newResolver(map[string][][]string{"rebind.example": {{"93.184.216.34"}, {"169.254.169.254"}}})
	d := &recordingDial{}
	g := loadedGuard(t, ssrf.Config{Resolver: r, Dial: d.dial})

	_, err := g.DialContext(context.Background(), "tcp", "rebind.example:443")
	if !errors.Is(err, errNotConnecting) {
		t.Fatalf("first dial: %v, want it to reach the dialer", err)
	}
	if got := d.dialled(); len(got) != 1 || got[0] != "93.184.216.34:443" {
		t.Fatalf("dialled %v, want exactly the vetted IP 93.184.216.34:443", got)
	}
	// The retry resolves again and is checked again.
	_, err = g.DialContext(context.Background(), "tcp", "rebind.example:443")
	if !errors.Is(err, transport.ErrBlocked) || !strings.Contains(err.Error(), "169.254.169.254") {
		t.Fatalf("second dial: %v, want blocked", err)
	}
	if got := d.dialled(); len(got) != 1 {
		t.Errorf("the rebound address was dialled: %v", got)
	}
}

func TestDialContext_OperatorAllowListAndUnsafeOffPolicyLetLoopbackThrough(t *testing.T) {
	cases := []struct {
		name string
		cfg  ssrf.Config
	}{
		{"allow-list", ssrf.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}},
		{"stored unsafe-off policy", ssrf.Config{Source: staticSource(`{"blocked_cidr_ranges":[],"allow_http":true}`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &recordingDial{}
			tc.cfg.Dial = d.dial
			tc.cfg.Resolver = newResolver(map[string][][]string{"local.example": {{"127.0.0.1"}}})
			g := loadedGuard(t, tc.cfg)
			for _, target := range []string{"127.0.0.1:8080", "local.example:8080", "[::ffff:127.0.0.1]:8080"} {
				if _, err := g.DialContext(context.Background(), "tcp", target); !errors.Is(err, errNotConnecting) {
					t.Errorf("dial %s: %v, want it allowed", target, err)
				}
			}
		})
	}
	g := loadedGuard(t, ssrf.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err := g.CheckAddr(netip.MustParseAddr("10.0.0.1")); !errors.Is(err, transport.ErrBlocked) {
		t.Errorf("the allow-list opened more than its range: %v", err)
	}
}

func TestGuard_FollowsTheStoredPolicyWithoutARestartAndFailsClosedOnGarbage(t *testing.T) {
	var (
		mu     sync.Mutex
		stored = `{"blocked_cidr_ranges":["203.0.113.0/24"],"allow_http":true}`
		found  = true
		broken error
	)
	src := func(context.Context) ([]byte, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return []byte(stored), found, broken
	}
	set := func(raw string, ok bool, err error) {
		mu.Lock()
		stored, found, broken = raw, ok, err
		mu.Unlock()
	}
	g := ssrf.New(ssrf.Config{Source: src})
	if err := g.CheckAddr(netip.MustParseAddr("8.8.8.8")); err == nil || errors.Is(err, transport.ErrPermanent) {
		t.Fatalf("before the first load: %v, want a retryable error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.Run(ctx, 10*time.Millisecond)

	eventually := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	blocked := func(a string) bool {
		return errors.Is(g.CheckAddr(netip.MustParseAddr(a)), transport.ErrBlocked)
	}
	eventually("the stored range is blocked", func() bool { return blocked("203.0.113.5") && !blocked("10.0.0.1") })
	if err := g.CheckURL("http://hooks.example/in"); err != nil {
		t.Errorf("http refused although the policy allows it: %v", err)
	}

	set("", false, nil) // an operator deletes the key: defaults
	eventually("the defaults apply", func() bool { return blocked("10.0.0.1") && !blocked("203.0.113.5") })
	if err := g.CheckURL("http://hooks.example/in"); !errors.Is(err, transport.ErrBlocked) {
		t.Errorf("http allowed under the defaults: %v", err)
	}

	set(`{"blocked_cidr_ranges":["10.0.0.0/8"`, true, nil) // truncated
	eventually("sends wait on an unreadable policy", func() bool {
		err := g.CheckAddr(netip.MustParseAddr("8.8.8.8"))
		return err != nil && !errors.Is(err, transport.ErrPermanent) && g.Ready(ctx) != nil
	})

	set(`{"allow_http":false}`, true, nil)
	eventually("a fixed policy is back in force", func() bool { return g.Ready(ctx) == nil })
	set("", true, fmt.Errorf("%w: key holds a hash", ssrf.ErrUnusable))
	eventually("sends wait on an unusable stored value", func() bool { return g.Ready(ctx) != nil })

	set(`{"allow_http":false}`, true, nil)
	eventually("a fixed policy is back in force again", func() bool { return g.Ready(ctx) == nil })
	set(`{"blocked_cidr_ranges":[],"allow_http":true}`, true, errors.New("redis down"))
	// A failing store keeps the policy in force: give Run a few rounds.
	for range 5 {
		_ = g.Refresh(ctx)
	}
	if !blocked("10.0.0.1") {
		t.Error("a store error changed the policy in force")
	}
}

// newLoopbackReceiver is a real HTTP server on 127.0.0.1 counting requests.
func newLoopbackReceiver(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func guardedTransport(t *testing.T, g *ssrf.Guard) *webhook.Transport {
	t.Helper()
	tr, err := webhook.New(webhook.Config{DialContext: g.DialContext, CheckURL: g.CheckURL, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

func TestWebhookWithGuard_RefusesPrivateReceiversPermanentlyWithoutSending(t *testing.T) {
	srv, hits := newLoopbackReceiver(t, nil)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	r := newResolver(map[string][][]string{"internal.example": {{"127.0.0.1"}}})
	// allow_http so that the address check is what refuses.
	g := loadedGuard(t, ssrf.Config{Resolver: r, AllowHTTP: true})
	tr := guardedTransport(t, g)

	for _, url := range []string{
		srv.URL + "/hook",
		"http://internal.example:" + strconv.Itoa(port) + "/hook",
		"http://[::ffff:127.0.0.1]:" + strconv.Itoa(port) + "/hook",
		"http://[::1]:" + strconv.Itoa(port) + "/hook",
	} {
		res, err := tr.Deliver(context.Background(), &transport.Request{URL: url, Body: []byte(`{}`), EventID: "evt-1"})
		if !errors.Is(err, transport.ErrBlocked) || !errors.Is(err, transport.ErrPermanent) {
			t.Errorf("%s: %+v, %v; want a blocked, permanent error", url, res, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the private receiver got %d requests", n)
	}
}

func TestWebhookWithGuard_DeliversToAnAllowListedReceiverAndNeverFollowsItsRedirects(t *testing.T) {
	var metaHits atomic.Int32
	meta, _ := newLoopbackReceiver(t, func(http.ResponseWriter, *http.Request) { metaHits.Add(1) })
	srv, hits := newLoopbackReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, meta.URL+"/latest/meta-data/", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	g := loadedGuard(t, ssrf.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowHTTP: true})
	tr := guardedTransport(t, g)

	res, err := tr.Deliver(context.Background(), &transport.Request{URL: srv.URL + "/hook", Body: []byte(`{}`), EventID: "evt-1"})
	if err != nil || res.Outcome != transport.Delivered {
		t.Fatalf("allow-listed receiver: %+v, %v", res, err)
	}
	res, err = tr.Deliver(context.Background(), &transport.Request{URL: srv.URL + "/redirect", Body: []byte(`{}`), EventID: "evt-1"})
	if err != nil || res.Outcome != transport.Failed || res.StatusCode != http.StatusFound {
		t.Fatalf("redirect: %+v, %v; want a failed 302", res, err)
	}
	if hits.Load() != 2 || metaHits.Load() != 0 {
		t.Errorf("receiver hits %d (want 2), redirect target hits %d (want 0)", hits.Load(), metaHits.Load())
	}
}

func TestWebhookWithGuard_RequiresHTTPSUnlessAllowed(t *testing.T) {
	srv, hits := newLoopbackReceiver(t, nil)
	g := loadedGuard(t, ssrf.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	_, err := guardedTransport(t, g).Deliver(context.Background(), &transport.Request{URL: srv.URL, Body: []byte(`{}`), EventID: "evt-1"})
	if !errors.Is(err, transport.ErrBlocked) || err.Error() != "Blocked by SSRF policy: HTTPS required" {
		t.Errorf("http under the defaults: %v", err)
	}
	if hits.Load() != 0 {
		t.Error("the receiver was reached over http")
	}
}
