package ssrf_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/internal/ssrf"
)

// blockedByDefault are addresses an absent policy must refuse, one or more
// per range, in every form that reaches them.
var blockedByDefault = []string{
	"10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1", "127.0.0.1", "127.255.255.254",
	"169.254.169.254",                                     // AWS, GCP, Azure, OCI metadata
	"0.0.0.0", "0.1.2.3", "100.64.0.1", "100.100.100.200", // this network, CGNAT (Alibaba metadata)
	"168.63.129.16", // Azure wire server
	"192.0.0.8", "198.18.0.1", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
	"::1", "::", "fe80::1", "fe80::1%eth0", "fc00::1", "fd12:3456::1", "fd00:ec2::254", "ff02::1",
	"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", // IPv4-mapped
	"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", // NAT64
	"2002:7f00:1::", "2002:a00:1::1", // 6to4
	"2001:0:4136:e378:8000:63bf:80ff:fffe", // Teredo with client 127.0.0.1
	"::127.0.0.1",                          // IPv4-compatible
}

var publicAddrs = []string{"93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"}

func TestDefaultPolicy_BlocksEveryPrivateAndSpecialRangeInEveryForm(t *testing.T) {
	p := ssrf.DefaultPolicy()
	for _, s := range blockedByDefault {
		if _, blocked := p.BlockedBy(netip.MustParseAddr(s)); !blocked {
			t.Errorf("%s is not blocked by the defaults", s)
		}
	}
	for _, s := range publicAddrs {
		if pfx, blocked := p.BlockedBy(netip.MustParseAddr(s)); blocked {
			t.Errorf("public %s is blocked (by %s)", s, pfx)
		}
	}
}

func TestParsePolicy_ReadsTheStoredPolicy(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		checks  bool
		http    bool
		blocked []string
		allowed []string
		notes   int
	}{
		{"absent fields mean defaults", `{}`, true, false, []string{"10.0.0.1", "100.64.0.1"}, []string{"8.8.8.8"}, 0},
		{"null list means defaults", `{"blocked_cidr_ranges":null,"allow_http":true}`, true, true, []string{"127.0.0.1"}, nil, 0},
		{"explicit ranges replace the defaults", `{"blocked_cidr_ranges":["203.0.113.0/24","2001:db8::/32"]}`, true, false,
			[]string{"203.0.113.9", "::ffff:203.0.113.9", "64:ff9b::cb00:7109", "2001:db8::5"}, []string{"10.0.0.1", "127.0.0.1"}, 0},
		{"bare address is a host route", `{"blocked_cidr_ranges":["203.0.113.7"]}`, true, false, []string{"203.0.113.7"}, []string{"203.0.113.8"}, 0},
		{"mapped range becomes its IPv4 range", `{"blocked_cidr_ranges":["::ffff:10.0.0.0/104"]}`, true, false, []string{"10.9.9.9", "::ffff:10.9.9.9"}, []string{"11.0.0.1"}, 0},
		{"unspecified reaches loopback", `{"blocked_cidr_ranges":["127.0.0.0/8"]}`, true, false, []string{"0.0.0.0"}, nil, 0},
		{"host names and junk are skipped, null entries ignored", `{"blocked_cidr_ranges":["localhost","10.0.0.0/33","x",null,"10.0.0.0/8"]}`, true, false,
			[]string{"10.0.0.1"}, []string{"127.0.0.1"}, 3},
		{"empty list with allow_http turns the check off", `{"blocked_cidr_ranges":[],"allow_http":true}`, false, true, nil, []string{"127.0.0.1", "169.254.169.254"}, 0},
		{"empty list alone keeps the defaults", `{"blocked_cidr_ranges":[],"allow_http":false}`, true, false, []string{"127.0.0.1"}, nil, 1},
		{"unknown fields are ignored", `{"allow_http":true,"future":{"x":1}}`, true, true, []string{"192.168.0.1"}, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ssrf.ParsePolicy([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if p.ChecksAddresses() != tc.checks || p.AllowsHTTP() != tc.http {
				t.Errorf("checks=%v http=%v, want %v %v", p.ChecksAddresses(), p.AllowsHTTP(), tc.checks, tc.http)
			}
			for _, s := range tc.blocked {
				if _, b := p.BlockedBy(netip.MustParseAddr(s)); !b {
					t.Errorf("%s not blocked", s)
				}
			}
			for _, s := range tc.allowed {
				if pfx, b := p.BlockedBy(netip.MustParseAddr(s)); b {
					t.Errorf("%s blocked by %s", s, pfx)
				}
			}
			if len(p.Notes) != tc.notes {
				t.Errorf("notes = %q, want %d", p.Notes, tc.notes)
			}
		})
	}
}

func TestParsePolicy_RejectsValuesItCannotTrust(t *testing.T) {
	cases := map[string]string{
		"truncated":          `{"blocked_cidr_ranges":["10.0.0.0/8"`,
		"not an object":      `["10.0.0.0/8"]`,
		"null":               `null`,
		"empty":              ``,
		"list of numbers":    `{"blocked_cidr_ranges":[10]}`,
		"list is a string":   `{"blocked_cidr_ranges":"10.0.0.0/8"}`,
		"allow_http string":  `{"allow_http":"true"}`,
		"patterns an object": `{"allowed_url_patterns":{"a":1}}`,
		"huge":               `{"x":"` + strings.Repeat("a", ssrf.MaxPolicyBytes) + `"}`,
		"too many entries":   `{"blocked_cidr_ranges":[` + strings.TrimSuffix(strings.Repeat(`"10.0.0.0/8",`, ssrf.MaxPolicyEntries+1), ",") + `]}`,
	}
	for name, raw := range cases {
		if p, err := ssrf.ParsePolicy([]byte(raw)); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, p)
		}
	}
}

func TestCheckURL_EnforcesHTTPSAndAllowedPatternsOnTheWholeURL(t *testing.T) {
	p, err := ssrf.ParsePolicy([]byte(`{"allowed_url_patterns":["https://*.example.com/*","https://hooks.partner.io/in"]}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		url, reason string
		allowHTTP   bool
	}{
		{"https://a.example.com/hook", "", false},
		{"https://a.b.example.com/x?y=1", "", false},
		{"https://hooks.partner.io/in", "", false},
		{"https://hooks.partner.io/in/more", "URL does not match any allowed pattern", false},
		{"https://aexample.com/hook", "URL does not match any allowed pattern", false},           // the dot is literal
		{"https://A.EXAMPLE.COM/hook", "URL does not match any allowed pattern", false},          // case-sensitive, as admin
		{"https://evil.io/hooks.partner.io/in", "URL does not match any allowed pattern", false}, // anchored at both ends
		// * is admin's .*: it crosses / and ?, so a pattern should pin the host.
		{"https://evil.io/?u=https://a.example.com/", "", false},
		{"http://a.example.com/hook", "HTTPS required", false},
		{"ftp://a.example.com/", "Only HTTP(S) URLs are allowed", true},
		{"http://a.example.com/hook", "URL does not match any allowed pattern", true}, // http allowed, pattern still applies
	}
	for _, tc := range cases {
		err := p.CheckURL(tc.url, tc.allowHTTP)
		var be *ssrf.BlockedError
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%s: %v, want allowed", tc.url, err)
		case tc.reason != "" && (!errors.As(err, &be) || be.Reason != tc.reason):
			t.Errorf("%s: %v, want %q", tc.url, err, tc.reason)
		case err != nil && strings.Contains(err.Error(), "example"):
			t.Errorf("%s: error %q quotes the URL", tc.url, err)
		}
	}
}
