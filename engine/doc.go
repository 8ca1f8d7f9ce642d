// Package engine delivers work items from the shared JetStream consumer.
// Any number of replicas run it against one durable consumer; each runs a
// bounded pool of workers. For every delivery id it loads the delivery,
// event, subscription and secret from Redis, decides (skip, stale, missing,
// inactive, send), sends through the transport registered for the
// subscription URL's scheme, records the outcome in Redis and only then
// settles the message: Ack when the delivery reached a final state,
// NakWithDelay with the subscription's backoff for a retry, and a delayed
// Nak with infrastructure backoff when Redis could not be read or written.
//
// Redis stays the system of record: attempts are counted in the delivery
// record, never by the JetStream server, so a Redis outage can delay a
// delivery but never fail it.
package engine
