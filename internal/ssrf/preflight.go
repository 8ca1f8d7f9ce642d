package ssrf

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// Refusal says why the engine would refuse to send to a URL and which
// setting would let it through.
type Refusal struct {
	// Reason is the guard's own wording ("HTTPS required", "resolves to
	// blocked IP 127.0.0.1 (in 127.0.0.0/8)").
	Reason string
	// Allow names the setting that allows the URL.
	Allow string
}

// Preflight checks raw as the guard checks it at send time — the URL rules
// for http(s) URLs, then every address the host resolves to — so a tool
// that stores a subscription can warn before the first delivery fails. It
// returns every refusal the URL meets (a plain-http loopback URL meets two:
// naming one at a time would send the operator back for the next), nil
// when the URL would be allowed (or its host does not resolve here, which
// says nothing about the engine's host), and an error only when the policy
// cannot be read.
func (g *Guard) Preflight(ctx context.Context, raw string) ([]Refusal, error) {
	p, err := g.Policy()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil, nil // the store refuses malformed URLs itself
	}
	var out []Refusal
	if scheme := strings.ToLower(u.Scheme); scheme == "http" || scheme == "https" {
		var be *BlockedError
		if err := p.CheckURL(raw, g.cfg.AllowHTTP); errors.As(err, &be) {
			r := Refusal{Reason: be.Reason}
			switch be.Reason {
			case "HTTPS required":
				r.Allow = "JETRELAY_SSRF_ALLOW_HTTP=true (--ssrf-allow-http) on jetrelay run, or allow_http in config:webhook-security"
				// The address rules apply next: check them too.
				if err := p.CheckURL(raw, true); errors.As(err, &be) {
					out = append(out, r)
					r = Refusal{Reason: be.Reason, Allow: "allowed_url_patterns in config:webhook-security (admin: PUT /v1/admin/config/webhook-security)"}
				}
			default:
				r.Allow = "allowed_url_patterns in config:webhook-security (admin: PUT /v1/admin/config/webhook-security)"
			}
			out = append(out, r)
		}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = g.cfg.Resolver.LookupNetIP(ctx, "ip", u.Hostname()); err != nil {
		return out, nil
	}
	for _, a := range addrs {
		var be *BlockedError
		if err := g.checkAddr(p, a); errors.As(err, &be) {
			plain := a.WithZone("").Unmap()
			out = append(out, Refusal{
				Reason: be.Reason,
				Allow:  fmt.Sprintf("JETRELAY_SSRF_ALLOW_CIDRS=%s (--ssrf-allow-cidrs) on jetrelay run, or blocked_cidr_ranges in config:webhook-security", netip.PrefixFrom(plain, plain.BitLen())),
			})
			break // one address names the setting; the others would repeat it
		}
	}
	return out, nil
}
