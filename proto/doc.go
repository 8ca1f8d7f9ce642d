// Package proto is the Cycles webhook wire model that jetrelay shares with
// cycles-server-admin, cycles-server and the reference events service:
// the Event, Delivery and Subscription records kept in Redis, their statuses,
// the Java Instant format they use for timestamps, the HMAC signature and
// AES-GCM secret format, the W3C traceparent header, the request header
// names, Jackson's string escaping, the webhook.disabled event and the retry
// arithmetic.
//
// Everything here is pure: no I/O, no globals. Records are read leniently
// (unknown fields are ignored, open strings stay open) because other services
// write them; the raw JSON bytes stay the source of truth and are never
// re-serialized from these structs.
package proto
