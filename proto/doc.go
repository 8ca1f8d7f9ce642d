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
//
// Imports: the standard library, with one exception. Records are decoded with
// github.com/goccy/go-json rather than encoding/json, because every delivery
// parses its delivery, event and subscription records and the decoder is on
// that hot path (commit 9852b50, `go test -bench . ./internal/store`). The
// exception is held in check, not trusted: FuzzDecodersAgree
// (decode_agree_test.go) requires both decoders to accept and refuse the same
// inputs and to decode what they accept to the same values, and everything
// that encodes, and every other parse, uses encoding/json. The package stays
// pure either way: no I/O, no globals.
package proto
