package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Driver opens the Transport for one or more URL schemes. A driver package
// registers itself from its init function, as database/sql drivers do:
//
//	func init() { transport.Register("myqueue", myqueue.Driver{}) }
//
// and a build includes it with a blank import. The host calls Open once per
// process (OpenRegistry), before the first delivery.
type Driver interface {
	// Open builds the transport from env. It validates its settings and
	// fails here rather than on the first delivery; it must not wait for
	// a destination to be reachable (destinations come and go).
	Open(ctx context.Context, env Env) (Transport, error)
}

// DriverFunc adapts a function to Driver.
type DriverFunc func(ctx context.Context, env Env) (Transport, error)

// Open calls f.
func (f DriverFunc) Open(ctx context.Context, env Env) (Transport, error) { return f(ctx, env) }

// Env is what the host process offers a driver when it opens a transport.
type Env struct {
	// Getenv reads a setting by its environment-variable name. The host
	// answers its own settings (flags included) and falls back to the
	// process environment, so a plugin documents its variables and reads
	// them here, never with os.Getenv. Nil reads nothing.
	Getenv func(key string) string
	// Logger is the host's logger; nil means slog.Default(). A transport
	// must never log a signature, a secret or a URL's credentials.
	Logger *slog.Logger
	// Shared holds objects the host lets drivers reuse, keyed (like
	// context values) by a type the driver's package defines; natsink
	// finds the engine's own NATS connection here.
	Shared map[any]any
}

// Setting returns env.Getenv(key), or "" when there is no Getenv.
func (env Env) Setting(key string) string {
	if env.Getenv == nil {
		return ""
	}
	return env.Getenv(key)
}

// Log returns env.Logger, or slog.Default() when it is nil.
func (env Env) Log() *slog.Logger {
	if env.Logger == nil {
		return slog.Default()
	}
	return env.Logger
}

// drivers is the process-wide driver table, the one piece of package-level
// mutable state jetrelay allows: like database/sql's, it is written only by
// init functions and read when the host starts.
var drivers = struct {
	sync.RWMutex
	m map[string]Driver
}{m: make(map[string]Driver)}

// Register makes d the driver for scheme (case-insensitive). It panics on a
// nil driver or a scheme registered twice, programming errors found when the
// binary starts.
func Register(scheme string, d Driver) {
	if d == nil {
		panic("transport: Register of nil driver for scheme " + scheme)
	}
	scheme = strings.ToLower(scheme)
	drivers.Lock()
	defer drivers.Unlock()
	if _, dup := drivers.m[scheme]; dup {
		panic("transport: Register called twice for scheme " + scheme)
	}
	drivers.m[scheme] = d
}

// Drivers lists the schemes with a registered driver, in order.
func Drivers() []string {
	drivers.RLock()
	defer drivers.RUnlock()
	return slices.Sorted(maps.Keys(drivers.m))
}

// OpenRegistry opens every registered driver with env and returns a Registry
// holding their transports. A driver registered for several schemes (http and
// https) is opened once when it is comparable. Close the registry to close
// the transports it opened.
func OpenRegistry(ctx context.Context, env Env) (*Registry, error) {
	drivers.RLock()
	table := maps.Clone(drivers.m)
	drivers.RUnlock()

	r := NewRegistry()
	opened := make(map[any]Transport)
	for _, scheme := range slices.Sorted(maps.Keys(table)) {
		d := table[scheme]
		comparable := reflect.TypeOf(d).Comparable()
		t, ok := Transport(nil), false
		if comparable {
			t, ok = opened[d]
		}
		if !ok {
			var err error
			if t, err = d.Open(ctx, env); err != nil {
				r.Close()
				return nil, fmt.Errorf("transport: open %s driver: %w", scheme, err)
			}
			if t == nil {
				r.Close()
				return nil, fmt.Errorf("transport: %s driver opened a nil transport", scheme)
			}
			r.owned = append(r.owned, t)
			if comparable {
				opened[d] = t
			}
		}
		if v, ok := d.(URLValidator); ok {
			r.Register(scheme, checked{t, v})
		} else {
			r.Register(scheme, t)
		}
	}
	return r, nil
}

// Close closes the transports OpenRegistry opened for r (those with a
// Close() or Close() error method). Transports added with Register stay
// their caller's to close.
func (r *Registry) Close() error {
	r.mu.Lock()
	owned := r.owned
	r.owned = nil
	r.mu.Unlock()
	var errs []error
	for _, t := range owned {
		switch c := t.(type) {
		case io.Closer:
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		case interface{ Close() }:
			c.Close()
		}
	}
	return errors.Join(errs...)
}
