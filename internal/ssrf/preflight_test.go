package ssrf

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

func TestPreflight_NamesTheSettingThatAllowsARefusedURL(t *testing.T) {
	cases := []struct {
		name, url   string
		cfg         Config
		policy      string
		reason      string
		allow       string
		also        string // a second setting that blocks it too, named at once
		wantAllowed bool
	}{
		{name: "plain http on loopback", url: "http://127.0.0.1:8080/hook", reason: "HTTPS required", allow: "JETRELAY_SSRF_ALLOW_HTTP=true",
			also: "JETRELAY_SSRF_ALLOW_CIDRS=127.0.0.1/32"},
		{name: "loopback once http is allowed", url: "http://127.0.0.1:8080/hook", cfg: Config{AllowHTTP: true},
			reason: "resolves to blocked IP 127.0.0.1", allow: "JETRELAY_SSRF_ALLOW_CIDRS=127.0.0.1/32"},
		{name: "allowed by the operator's overrides", url: "http://127.0.0.1:8080/hook",
			cfg: Config{AllowHTTP: true, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, wantAllowed: true},
		{name: "outside the allowed patterns", url: "https://203.0.113.7/hook", policy: `{"allowed_url_patterns":["https://*.example.com/*"]}`,
			reason: "URL does not match any allowed pattern", allow: "allowed_url_patterns"},
		{name: "a public https URL", url: "https://203.0.113.7/hook", wantAllowed: true},
		{name: "a nats URL to a private address", url: "nats://10.1.2.3:4222/orders", reason: "resolves to blocked IP 10.1.2.3", allow: "10.1.2.3/32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if tc.policy != "" {
				cfg.Source = func(context.Context) ([]byte, bool, error) { return []byte(tc.policy), true, nil }
			}
			g := New(cfg)
			if err := g.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			r, err := g.Preflight(context.Background(), tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantAllowed {
				if r != nil {
					t.Fatalf("refused: %+v", r)
				}
				return
			}
			if len(r) == 0 || !strings.Contains(r[0].Reason, tc.reason) || !strings.Contains(r[0].Allow, tc.allow) {
				t.Fatalf("got %+v, want reason %q and a setting containing %q", r, tc.reason, tc.allow)
			}
			if tc.also == "" && len(r) != 1 || tc.also != "" && (len(r) != 2 || !strings.Contains(r[1].Allow, tc.also)) {
				t.Fatalf("got %+v, want every blocking setting named once (also %q)", r, tc.also)
			}
		})
	}
}
