// Package inbox is `jetrelay inbox`: a durable receiving inbox in
// PostgreSQL. Intake verifies X-Cycles-Signature (transport/receive),
// stores the raw event (headers and body, unique by X-Cycles-Event-Id) and
// answers 2xx only once the row is committed; nothing else happens in the
// request. Workers claim due rows with FOR UPDATE SKIP LOCKED and a lease
// (claimed_until), forward the original body with the identity headers to
// an HTTP(S) URL or a NATS subject, retry with backoff and move an event to
// dead_letter after MaxAttempts failures; a crashed worker's lease expires
// and another worker takes the event over. List, Inspect and Replay are the
// operator's view. The schema is created and migrated by the inbox itself.
package inbox
