package ssrf_test

import (
	"net/netip"
	"testing"

	"github.com/jetrelay/jetrelay/internal/ssrf"
)

// FuzzParsePolicy feeds arbitrary stored policies and URLs through the
// parser, the URL check and the address check: never a panic, and every
// refusal names a valid range.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []struct{ policy, url string }{
		{`{"blocked_cidr_ranges":["10.0.0.0/8","::1"],"allowed_url_patterns":["https://*.example.com/*"],"allow_http":false}`, "https://a.example.com/x"},
		{`{"blocked_cidr_ranges":[],"allow_http":true}`, "http://127.0.0.1:8080/"},
		{`{"blocked_cidr_ranges":["localhost",null,"1.2.3.4/99"]}`, "https://user:pw@host/"},
		{`{"allowed_url_patterns":["*","(", "a**b\\"]}`, "https://[::1]:443/%zz"},
		{`{"allow_http":1}`, ""},
	} {
		f.Add([]byte(s.policy), s.url)
	}
	f.Fuzz(func(t *testing.T, raw []byte, url string) {
		p, err := ssrf.ParsePolicy(raw)
		if err != nil {
			return
		}
		_ = p.CheckURL(url, false)
		_ = p.CheckURL(url, true)
		for _, a := range []string{"127.0.0.1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::"} {
			pfx, blocked := p.BlockedBy(netip.MustParseAddr(a))
			if blocked && !pfx.IsValid() {
				t.Fatalf("%s blocked by an invalid prefix", a)
			}
		}
	})
}

// FuzzParseCIDR checks the strict range parser: whatever it accepts is a
// valid, masked prefix that contains its own address.
func FuzzParseCIDR(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "10.1.2.3", "::ffff:10.0.0.0/104", "fe80::1%eth0", "fc00::/7", "1.2.3.4/33", "localhost", " 127.0.0.1 ", "::/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pfx, err := ssrf.ParseCIDR(s)
		if err != nil {
			return
		}
		if !pfx.IsValid() || pfx != pfx.Masked() || !pfx.Contains(pfx.Addr()) {
			t.Fatalf("ParseCIDR(%q) = %v, not a valid masked prefix", s, pfx)
		}
	})
}

// FuzzBlockedBy checks the address check over any 16 bytes: an address in a
// blocked IPv4 range is blocked in its mapped, NAT64 and 6to4 forms too.
func FuzzBlockedBy(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1})
	f.Add([]byte{169, 254, 169, 254})
	f.Add([]byte{8, 8, 8, 8})
	p := ssrf.DefaultPolicy()
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(b))
		_, want := p.BlockedBy(v4)
		forms := map[string]netip.Addr{
			"mapped": netip.AddrFrom16(netip.MustParseAddr("::ffff:0:0").As16()),
			"nat64":  netip.MustParseAddr("64:ff9b::"),
			"6to4":   netip.MustParseAddr("2002::"),
		}
		for name, base := range forms {
			x := base.As16()
			switch name {
			case "6to4":
				copy(x[2:6], b)
			default:
				copy(x[12:16], b)
			}
			if _, got := p.BlockedBy(netip.AddrFrom16(x)); want && !got {
				t.Fatalf("%s is blocked but its %s form %s is not", v4, name, netip.AddrFrom16(x))
			}
		}
	})
}
