// Package testenv gives every package's tests the real infrastructure
// jetrelay runs against — a redis-server child process, an in-process NATS
// server, a private PostgreSQL (internal/pgproc) — on free loopback ports,
// torn down by t.Cleanup. Tests use these instead of mocks.
package testenv
