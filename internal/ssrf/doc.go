// Package ssrf owns jetrelay's send-time defence against server-side request
// forgery: the destination policy of config:webhook-security (contract §3.5,
// §9), its restrictive defaults, and a dialer that checks the address it is
// about to connect to, after resolution, on every attempt.
//
// Admin validates a subscription URL when it is written, but a DNS answer can
// change after that (DNS rebinding), the policy can be tightened later, and
// legacy subscriptions were never checked. So the check that counts is the
// one made here, on the resolved address actually dialled: the Guard resolves
// the host itself, refuses the connection if any address is blocked, and then
// dials the vetted IP (never the name again), leaving no window between check
// and connect.
//
// The package knows nothing about Redis: the stored policy comes from a
// Source function the caller wires up.
package ssrf
