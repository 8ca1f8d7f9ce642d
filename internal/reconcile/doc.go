// Package reconcile is defence in depth behind the at-least-once hops
// (DESIGN decision 16): a reconciler, run by the bridge role, finds
// deliveries that are neither terminal nor queued anywhere — not in
// Redis's dispatch lists, not a work item, a wake-up or a held copy in
// JetStream — some margin after they were due, and puts them back on
// dispatch:pending, or fails them with the reference's message once they
// are past the stale cutoff. It also holds the one definition of "stuck"
// that `jetrelay deliveries inspect` and `requeue` use (Locator).
package reconcile
