// Package receiver is a webhook receiver for demos, tests and benchmarks: it
// verifies X-Cycles-Signature and deduplicates by X-Cycles-Event-Id with the
// public transport/receive package, as a Cycles receiver should, records
// every request, and can be told to fail, so the engine's retry, failure and
// auto-disable paths can be shown and tested against real HTTP.
package receiver
