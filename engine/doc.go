// Package engine delivers work items from the shared JetStream consumer.
// Any number of replicas run it against one durable consumer; each runs a
// bounded pool of workers. For every delivery id it loads the delivery,
// event, subscription and secret from Redis, decides (skip, stale, missing,
// inactive, boundary, breaker, send), sends through the transport
// registered for the subscription URL's scheme, records the outcome in
// Redis and only then settles the message: Ack when the delivery reached a
// final state or waits in JetStream, NakWithDelay for a short retry only.
// Every other wait, including the infrastructure backoff when Redis could
// not be read or written, is the item's wake-up, published where the item
// is settled (handling.go), so no outage holds MaxAckPending slots.
//
// Waiting work lives in the dispatch stream, never in Redis: a longer retry
// or a put-off (open breaker, busy subscription) is the delivery's wake-up,
// a JetStream message schedule (wait.go); a delivery of a paused or
// disabled subscription is held as a stored message and released by the
// subscription's held-check (held.go). Per-subscription circuit breakers
// (breaker.go) mirror auto-disable: they hold a delivery back at most until
// its retry schedule would have ended, then let it through for one
// last-chance send whose own answer alone can fail it (never another
// delivery's), counting toward consecutive_failures. An operator's redrive
// closes them (evidence.go).
//
// Each handling of a work item is one value (handling.go), and each
// decision is reported in one place (report.go) to the Observer, the
// attempt span and the log.
//
// Redis stays the system of record: attempts are counted in the delivery
// record, never by the JetStream server, so a Redis outage can delay a
// delivery but never fail it.
package engine
