// Package metrics owns jetrelay's Prometheus metrics: a private registry
// served on the management port's /metrics, the reference service's
// cycles_webhook_* series (same names, labels and reason codes, contract
// §6.10) fed by the engine through engine.Observer, and the jetrelay_*
// series a JetStream engine needs (queue depth and ack-pending from consumer
// info, Redis backlogs, bridge counters, breaker states), read on demand at
// scrape time. Every label value comes from a closed set or is capped, so
// the number of series is bounded whatever the records contain.
package metrics
