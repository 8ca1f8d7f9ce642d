package ssrf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
)

// Key is the Redis key admin stores the policy under.
const Key = "config:webhook-security"

// Bounds on a stored policy. They are far above any real configuration and
// only keep a hostile or broken value from costing memory or CPU per send.
const (
	MaxPolicyBytes   = 1 << 20
	MaxPolicyEntries = 4096
	MaxPatternLength = 4096
)

// ReferenceBlockedRanges are admin's defaults for an absent policy (§3.5).
var ReferenceBlockedRanges = []string{
	"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8", "169.254.0.0/16", "::1/128", "fc00::/7",
}

// ExtraDefaultBlockedRanges are blocked on top of ReferenceBlockedRanges when
// no policy is stored: "this network" (0.0.0.0 reaches the local host on
// Linux), carrier-grade NAT (Alibaba's metadata service lives there), IPv6
// link-local and unspecified, IETF protocol assignments, benchmarking,
// multicast and reserved space, and cloud metadata addresses outside those
// (Azure's wire server). IPv4-mapped, NAT64 and 6to4 forms of every blocked
// IPv4 range are blocked by the address check itself.
var ExtraDefaultBlockedRanges = []string{
	"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
	"168.63.129.16/32",
	"::/128", "fe80::/10", "ff00::/8", "fd00:ec2::254/128",
}

// Policy is a parsed config:webhook-security value. The zero Policy blocks
// nothing and requires https.
type Policy struct {
	blocked    []netip.Prefix
	patterns   []*regexp.Regexp
	allowHTTP  bool
	checkAddrs bool
	// Notes says what parsing skipped or overrode (an entry that is not a
	// literal CIDR, an empty block list without allow_http); worth a warning.
	Notes []string
}

// DefaultPolicy is the policy of an absent key: the reference defaults plus
// ExtraDefaultBlockedRanges, https only, no URL patterns.
func DefaultPolicy() *Policy {
	p := &Policy{checkAddrs: true}
	for _, s := range append(append([]string(nil), ReferenceBlockedRanges...), ExtraDefaultBlockedRanges...) {
		pfx, err := ParseCIDR(s)
		if err != nil {
			panic("ssrf: bad built-in range " + s) // a typo above, caught by every test
		}
		p.blocked = append(p.blocked, pfx)
	}
	return p
}

// ChecksAddresses reports whether the policy checks addresses at all. A
// stored policy turns the check off only with both an explicit empty
// blocked_cidr_ranges and allow_http true, which is unsafe outside tests.
func (p *Policy) ChecksAddresses() bool { return p.checkAddrs }

// AllowsHTTP reports whether plain http:// URLs are allowed.
func (p *Policy) AllowsHTTP() bool { return p.allowHTTP }

// BlockedRanges returns the ranges the policy blocks.
func (p *Policy) BlockedRanges() []netip.Prefix { return append([]netip.Prefix(nil), p.blocked...) }

// ParsePolicy reads a stored config:webhook-security value. Unknown fields
// are ignored (admin's class may grow); a value that is not a JSON object,
// has fields of the wrong type or exceeds the bounds is an error, which the
// Guard treats as "policy unknown" and fails closed on. Entries of
// blocked_cidr_ranges that are not literal CIDRs (or addresses) are skipped
// and named in Notes, as the reference skips them.
//
// A missing or null blocked_cidr_ranges means the default ranges. An
// explicit empty list disables the address check only together with
// allow_http true; otherwise the defaults stay in force.
func ParsePolicy(raw []byte) (*Policy, error) {
	if len(raw) > MaxPolicyBytes {
		return nil, fmt.Errorf("ssrf: policy is %d bytes, more than %d", len(raw), MaxPolicyBytes)
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("ssrf: policy is not a JSON object")
	}
	var doc struct {
		Blocked   json.RawMessage `json:"blocked_cidr_ranges"`
		Patterns  json.RawMessage `json:"allowed_url_patterns"`
		AllowHTTP json.RawMessage `json:"allow_http"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("ssrf: policy is not valid JSON: %w", err)
	}
	p := &Policy{checkAddrs: true}
	if !isNull(doc.AllowHTTP) {
		if err := json.Unmarshal(doc.AllowHTTP, &p.allowHTTP); err != nil {
			return nil, errors.New("ssrf: policy allow_http must be true or false")
		}
	}
	blocked, blockedSet, err := stringList(doc.Blocked, "blocked_cidr_ranges")
	if err != nil {
		return nil, err
	}
	patterns, _, err := stringList(doc.Patterns, "allowed_url_patterns")
	if err != nil {
		return nil, err
	}
	for _, s := range patterns {
		if s == nil {
			continue
		}
		if len(*s) > MaxPatternLength {
			return nil, fmt.Errorf("ssrf: policy has an allowed_url_patterns entry of %d bytes, more than %d", len(*s), MaxPatternLength)
		}
		p.patterns = append(p.patterns, compileGlob(*s))
	}
	switch {
	case !blockedSet:
		p.blocked = DefaultPolicy().blocked
	case len(blocked) == 0 && p.allowHTTP:
		p.checkAddrs = false
	case len(blocked) == 0:
		p.blocked = DefaultPolicy().blocked
		p.Notes = append(p.Notes, "blocked_cidr_ranges is empty but allow_http is not true: the default blocked ranges apply")
	default:
		for _, s := range blocked {
			if s == nil {
				continue
			}
			pfx, err := ParseCIDR(*s)
			if err != nil {
				p.Notes = append(p.Notes, "skipped blocked_cidr_ranges entry: "+err.Error())
				continue
			}
			p.blocked = append(p.blocked, pfx)
		}
	}
	return p, nil
}

// stringList decodes an optional JSON array of strings (null entries kept as
// nil). set is false when the field is absent or null.
func stringList(raw json.RawMessage, field string) (list []*string, set bool, err error) {
	if isNull(raw) {
		return nil, false, nil
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, false, fmt.Errorf("ssrf: policy %s must be an array of strings", field)
	}
	if len(list) > MaxPolicyEntries {
		return nil, false, fmt.Errorf("ssrf: policy %s has %d entries, more than %d", field, len(list), MaxPolicyEntries)
	}
	return list, true, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// ParseCIDR reads a literal "addr/prefix" or a bare address (a host route),
// as upstream's strict parser does (0.1.25.24): no host names, no zones. An
// IPv4-mapped IPv6 range is turned into its IPv4 range, since addresses are
// unmapped before they are matched.
func ParseCIDR(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var pfx netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if pfx, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a literal CIDR range", truncate(s))
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not a literal IP address or CIDR range", truncate(s))
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
		pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
	}
	return pfx.Masked(), nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// compileGlob turns an allowed_url_patterns entry into an anchored,
// case-sensitive regexp: * matches anything, everything else is literal.
// Go's regexp runs in linear time, so no pattern can stall a send.
func compileGlob(glob string) *regexp.Regexp {
	parts := strings.Split(glob, "*")
	for i, part := range parts {
		parts[i] = regexp.QuoteMeta(part)
	}
	return regexp.MustCompile(`^(?s:` + strings.Join(parts, ".*") + `)$`)
}

// BlockedError is a destination the policy refuses. Its message is short
// enough for a delivery's error_message and never quotes the URL, which may
// carry credentials.
type BlockedError struct {
	Reason string
}

func (e *BlockedError) Error() string { return "Blocked by SSRF policy: " + e.Reason }

// CheckURL checks what the policy says about a URL before any connection:
// http only when allowed (by the policy or allowHTTP, the operator's
// override), and a match with one of allowed_url_patterns when there are
// any. It returns a *BlockedError or nil.
func (p *Policy) CheckURL(raw string, allowHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &BlockedError{Reason: "Malformed URL"}
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !p.allowHTTP && !allowHTTP {
			return &BlockedError{Reason: "HTTPS required"}
		}
	default:
		return &BlockedError{Reason: "Only HTTP(S) URLs are allowed"}
	}
	if len(p.patterns) == 0 {
		return nil
	}
	for _, re := range p.patterns {
		if re.MatchString(raw) {
			return nil
		}
	}
	return &BlockedError{Reason: "URL does not match any allowed pattern"}
}

// BlockedBy returns the blocked range that a holds, or false. Besides a
// itself it checks what a really reaches: the IPv4 address inside an
// IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96), 6to4 (2002::/16) or
// Teredo address, and for an unspecified address (0.0.0.0, ::), which
// connects to the local host, the loopback address.
func (p *Policy) BlockedBy(a netip.Addr) (netip.Prefix, bool) {
	if !p.checkAddrs {
		return netip.Prefix{}, false
	}
	for _, c := range reaches(a) {
		for _, pfx := range p.blocked {
			if pfx.Contains(c) {
				return pfx, true
			}
		}
	}
	return netip.Prefix{}, false
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
	compat    = netip.MustParsePrefix("::/96")
)

// reaches lists a (unmapped, without zone) and the addresses it stands for.
func reaches(a netip.Addr) []netip.Addr {
	a = a.WithZone("").Unmap()
	out := []netip.Addr{a}
	if a.IsUnspecified() {
		if a.Is4() {
			out = append(out, netip.AddrFrom4([4]byte{127, 0, 0, 1}))
		} else {
			out = append(out, netip.IPv6Loopback())
		}
	}
	if !a.Is6() {
		return out
	}
	b := a.As16()
	switch {
	case nat64.Contains(a), compat.Contains(a):
		out = append(out, netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		out = append(out, netip.AddrFrom4([4]byte(b[2:6])))
	case teredo.Contains(a):
		out = append(out, netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	}
	return out
}
