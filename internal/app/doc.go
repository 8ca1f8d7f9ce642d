// Package app assembles one jetrelay process from its configuration: Redis
// and NATS connections (an embedded JetStream server when no NATS_URL is
// set), the SSRF guard, the transports, the bridge, the engine, retention,
// metrics, tracing and the management endpoints. `jetrelay run`, the demo
// and the benchmark all start jetrelay through it, so what they exercise is
// what production runs.
//
// It links no test helpers (redis-server launcher, admin writer, test
// receivers): TestApp_LinksNoTestHelpers keeps it so.
package app
