// Package ops is the operator's toolbox behind `jetrelay deliveries
// list|inspect|requeue`, `jetrelay quarantine list|requeue`, `jetrelay
// status` and `jetrelay events emit`: it answers "what happened to this
// event, where is it now, and send it again" from the same Redis records
// and JetStream stream the engine uses, and serves the same status as JSON
// on the management port.
//
// It reads admin's indexes (webhooks:* SETs, deliveries:{subscription}
// ZSETs), never KEYS or SCAN; it writes only through admin's own scripts
// (events emit) and compare-and-set resets that re-enqueue a delivery the
// way admin enqueues a new one (requeue), so running a command twice sends
// once. It never reads a signing secret.
package ops
