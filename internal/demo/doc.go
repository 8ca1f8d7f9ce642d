// Package demo is `jetrelay demo`: a self-contained tour that starts a
// throwaway redis-server, an embedded JetStream, a receiver with a healthy,
// a flaky and a dead endpoint, and a jetrelay stack, emits events the way
// admin does and shows deliveries succeed, retry and fail.
package demo
