package transport

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ErrUnsupportedScheme is returned by Registry.Lookup when no transport is
// registered for a URL's scheme.
var ErrUnsupportedScheme = errors.New("transport: unsupported URL scheme")

// Registry maps URL schemes to transports. The engine holds one; it is safe
// for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	schemes map[string]Transport
	owned   []Transport // opened by OpenRegistry, closed by Close
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{schemes: make(map[string]Transport)} }

// Register makes t the transport for scheme (case-insensitive). Like
// database/sql.Register it panics on a nil transport or a scheme registered
// twice: both are programming errors found at start-up.
func (r *Registry) Register(scheme string, t Transport) {
	if t == nil {
		panic("transport: Register of nil transport for scheme " + scheme)
	}
	scheme = strings.ToLower(scheme)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.schemes[scheme]; dup {
		panic("transport: Register called twice for scheme " + scheme)
	}
	r.schemes[scheme] = t
}

// Lookup returns the transport for rawURL's scheme. Its errors are
// Permanent: no retry makes such a URL deliverable.
func (r *Registry) Lookup(rawURL string) (Transport, error) {
	scheme, err := schemeOf(rawURL)
	if err != nil {
		return nil, Permanent(err)
	}
	r.mu.RLock()
	t, ok := r.schemes[scheme]
	r.mu.RUnlock()
	if !ok {
		return nil, Permanent(fmt.Errorf("%w %q (registered: %s; a transport plugin not compiled in?)", ErrUnsupportedScheme, scheme, strings.Join(r.Schemes(), ", ")))
	}
	return t, nil
}

// Schemes lists the registered schemes in order.
func (r *Registry) Schemes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.schemes))
	for s := range r.schemes {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
