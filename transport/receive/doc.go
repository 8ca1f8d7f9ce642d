// Package receive is the receiving half of a jetrelay (or Cycles) delivery,
// for services written in Go: it verifies X-Cycles-Signature over the raw
// body and deduplicates by X-Cycles-Event-Id, for webhook requests, NATS
// messages and SQS messages alike.
//
// Delivery is at least once, so every receiver sees duplicates: a retry after
// a lost answer, a replay from admin, a redelivery after a crash. The pattern
// this package packages (docs/receiving.md explains it):
//
//   - Verifier checks the signature in constant time against one or more
//     secrets (two during a rotation), over the exact bytes received, before
//     anything parses them. As HTTP middleware it answers 401 to a missing or
//     wrong signature and 413 to a body over the limit, without calling the
//     next handler.
//   - Deduper records the event id in a Store before the handler runs its
//     side effects, and answers a duplicate 200 without running it again.
//     redisstore.Store (SET NX with a TTL, 72 h by default) and
//     pgstore.Store (INSERT … ON CONFLICT DO NOTHING on a unique event id)
//     are the shared stores, MemoryStore the single-process one; a Store is a
//     three-method interface, so others are easy.
//
// This package depends only on the standard library and proto, so a receiver
// that only verifies links no database or broker client. Like database/sql
// drivers, the Redis and PostgreSQL stores live in the subpackages
// redisstore and pgstore, and the SQS adapter in sqsreceive; NATSMessage
// takes a nats.Header as the plain map it is.
//
// The failure window: a claim is a lease, not a verdict. Claim marks the
// event in progress for a lease; only a handler that succeeded (2xx, or a nil
// error) turns it into done. A handler that fails releases the claim, so the
// sender's retry is processed; a receiver that crashes mid-handler leaves a
// claim that expires with its lease, after which a retry is processed. A
// retry that arrives while a claim is live is answered 503 with Retry-After,
// which the sender treats as "try again later".
package receive
