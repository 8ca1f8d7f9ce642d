// Package adaptive owns the engine's per-subscription concurrency limits:
// how many sends to one endpoint a replica runs at once. Each endpoint's
// limit adapts to what it can take (Limit: grows while it answers fast and
// healthy, shrinks toward 1 as its latency rises, it times out or it
// fails), and a Pool shares the replica's workers among the endpoints
// busy at the same time so that none is starved by another's backlog and
// one endpoint alone may use them all.
//
// The package knows nothing of Redis, JetStream or transports: the engine
// asks a Pool for a slot before a send and reports each send's latency and
// health when it ends, which keeps the algorithm testable with synthetic
// latencies and a fake clock.
package adaptive
