// Package admin writes Cycles webhook-plane records into Redis exactly as
// cycles-server-admin does: the same keys, the same verbatim Lua scripts, the
// same ids, and JSON with admin's field order and null policy byte for byte.
// Tests, `jetrelay demo`, the benchmark and `jetrelay subscriptions create`
// use it so that what jetrelay reads is indistinguishable from what admin
// (or, with EnqueueRuntimeStyle, cycles-server) would have written.
//
// It is a producer only: it never delivers anything and keeps no state
// beyond its Redis client and secret key.
package admin
