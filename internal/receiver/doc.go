// Package receiver is a webhook receiver for demos, tests and benchmarks: it
// verifies X-Cycles-Signature the way a Cycles receiver should, deduplicates
// by X-Cycles-Event-Id (seed 000's pattern), and can be told to fail, so the
// engine's retry, failure and auto-disable paths can be shown and tested
// against real HTTP.
package receiver
