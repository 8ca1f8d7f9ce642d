package metrics

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Label values that stand in for missing or excess ones.
const (
	// Unknown replaces a null or blank value, as Micrometer's callers in
	// the reference service do.
	Unknown = "UNKNOWN"
	// Other replaces a value past its label's cap.
	Other = "other"
)

// maxLabelLen bounds one label value: longer ones are folded into Other.
const maxLabelLen = 128

// capped admits the first max distinct values of an open label (event
// types, tenants: strings taken from records) and folds every later one
// into Other, so a misbehaving producer cannot grow the number of series
// without bound. Values are never forgotten: a process that saw max types
// keeps reporting exactly those, which keeps a series' identity stable.
type capped struct {
	max  int
	mu   sync.RWMutex
	seen map[string]struct{}
}

func newCapped(max int) *capped {
	return &capped{max: max, seen: make(map[string]struct{}, max)}
}

// value returns v as a label value: Unknown when blank, Other when not
// valid UTF-8, too long, or new beyond the cap.
func (c *capped) value(v string) string {
	if isBlank(v) {
		return Unknown
	}
	if len(v) > maxLabelLen || !utf8.ValidString(v) {
		return Other
	}
	c.mu.RLock()
	_, ok := c.seen[v]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[v]; ok {
		return v
	}
	if len(c.seen) >= c.max {
		return Other
	}
	c.seen[v] = struct{}{}
	return v
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// oneOf returns v when it is in the closed set allowed, Other otherwise:
// for labels the engine fills from a fixed vocabulary, so that a new code
// path can never leak an open string into a label.
func oneOf(v string, allowed map[string]bool) string {
	if allowed[v] {
		return v
	}
	return Other
}

func set(vs ...string) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}
