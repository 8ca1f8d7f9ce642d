package transport

import (
	"context"
	"net"
)

// DialFunc opens a network connection, as net.Dialer.DialContext does. It
// is an alias so that any function of this shape (a method value included)
// is one.
type DialFunc = func(ctx context.Context, network, address string) (net.Conn, error)

// DialerKey is the Env.Shared key under which the host offers its
// destination-policy dialer, a DialFunc (jetrelay's SSRF guard). A driver
// whose connections go to hosts that tenants choose opens them with it: it
// resolves the host itself, refuses blocked addresses with an error wrapped
// by Blocked, and connects to the vetted address. Return such a refusal so
// that errors.Is(err, ErrBlocked) still holds.
type DialerKey struct{}

// Dialer returns the DialFunc the host offers under DialerKey, or nil when
// it offers none (connections are then not vetted by the host).
func (env Env) Dialer() DialFunc {
	d, _ := env.Shared[DialerKey{}].(DialFunc)
	return d
}

// URLCheckKey is the Env.Shared key under which the host offers its
// destination policy's URL check, a func(rawURL string) error (jetrelay's
// SSRF guard: https only, allowed patterns). A driver whose URLs name
// tenant-chosen hosts calls it before each send and returns its error as it
// is: a Blocked or Permanent error stays so.
type URLCheckKey struct{}

// URLCheck returns the check the host offers under URLCheckKey, or nil when
// it offers none.
func (env Env) URLCheck() func(rawURL string) error {
	c, _ := env.Shared[URLCheckKey{}].(func(string) error)
	return c
}
