package metrics

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/mgmt"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/reconcile"
	"github.com/jetrelay/jetrelay/internal/store"
)

// scraper is a collector whose series are read at scrape time by collect,
// from a fixed list of descriptions. Prometheus gathers collectors
// concurrently, so slow reads add up to the slowest, not their sum.
type scraper struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

func (s scraper) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs {
		ch <- d
	}
}

func (s scraper) Collect(ch chan<- prometheus.Metric) { s.collect(ch) }

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, lvs ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lvs...)
}

func counterValue(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, lvs ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lvs...)
}

func boolValue(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// WatchQueue reports the dispatch stream and its durable consumer, read
// from JetStream at every scrape (bounded by ScrapeTimeout). Every replica
// reports the same shared values: aggregate with max, not sum. Call it at
// most once.
func (m *Metrics) WatchQueue(js jetstream.JetStream, qc queue.Config) {
	qc = qc.WithDefaults()
	stream, consumer := qc.Stream, qc.Consumer
	sl := []string{"stream"}
	cl := []string{"stream", "consumer"}
	var (
		up          = prometheus.NewDesc("jetrelay_queue_info_up", "1 when the last scrape could read the dispatch stream and consumer from JetStream, 0 when it could not.", nil, nil)
		messages    = prometheus.NewDesc("jetrelay_stream_messages", "Messages stored in the dispatch stream: work items (not yet delivered, in flight or in a short delayed nak) plus waiting work (wake-ups and held deliveries, see jetrelay_scheduled_wakeups and jetrelay_held_deliveries); the keeper messages that keep the stream from being empty (one per running bridge) are left out.", sl, nil)
		pending     = prometheus.NewDesc("jetrelay_consumer_pending", "Work items the shared consumer has not delivered to any engine yet (the backlog).", cl, nil)
		ackPending  = prometheus.NewDesc("jetrelay_consumer_ack_pending", "Work items delivered and not yet acked: sends in flight plus short retries waiting as delayed naks.", cl, nil)
		maxAck      = prometheus.NewDesc("jetrelay_consumer_max_ack_pending", "The consumer's MaxAckPending: ack-pending at this value stops delivery.", cl, nil)
		redelivered = prometheus.NewDesc("jetrelay_consumer_redelivered", "Work items currently redelivered at least once and not yet acked (naked retries, lost acks).", cl, nil)
		waiting     = prometheus.NewDesc("jetrelay_consumer_waiting_pulls", "Pull requests waiting on the consumer (idle engine capacity).", cl, nil)
	)
	m.reg.MustRegister(scraper{
		descs: []*prometheus.Desc{up, messages, pending, ackPending, maxAck, redelivered, waiting},
		collect: func(ch chan<- prometheus.Metric) {
			ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
			defer cancel()
			s, err := js.Stream(ctx, stream)
			if err != nil {
				gauge(ch, up, 0)
				return
			}
			c, err := s.Consumer(ctx, consumer)
			if err != nil {
				gauge(ch, up, 0)
				return
			}
			ci := c.CachedInfo()
			stored, err := queue.StoredMsgs(ctx, s, qc)
			if err != nil {
				gauge(ch, up, 0)
				return
			}
			gauge(ch, up, 1)
			gauge(ch, messages, float64(stored), stream)
			gauge(ch, pending, float64(ci.NumPending), stream, consumer)
			gauge(ch, ackPending, float64(ci.NumAckPending), stream, consumer)
			gauge(ch, maxAck, float64(ci.Config.MaxAckPending), stream, consumer)
			gauge(ch, redelivered, float64(ci.NumRedelivered), stream, consumer)
			gauge(ch, waiting, float64(ci.NumWaiting), stream, consumer)
		},
	})
}

// WatchRedis reports the Redis lists and sets work waits in
// (store.Backlogs), read with one round trip per scrape. Call it at most
// once.
func (m *Metrics) WatchRedis(st *store.Store) {
	var (
		up      = prometheus.NewDesc("jetrelay_redis_info_up", "1 when the last scrape could read the Redis backlogs, 0 when it could not.", nil, nil)
		pending = prometheus.NewDesc("jetrelay_dispatch_pending", "LLEN dispatch:pending: delivery ids admin enqueued that no bridge has taken yet (bridge lag).", nil, nil)
		failed  = prometheus.NewDesc("jetrelay_dispatch_failed", "LLEN dispatch:failed: quarantined work items (corrupt records, malformed ids) kept for an operator.", nil, nil)
		retry   = prometheus.NewDesc("jetrelay_dispatch_retry", "ZCARD dispatch:retry: retries left by the reference service, promoted by the bridge.", nil, nil)
	)
	m.reg.MustRegister(scraper{
		descs: []*prometheus.Desc{up, pending, failed, retry},
		collect: func(ch chan<- prometheus.Metric) {
			ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
			defer cancel()
			b, err := st.Backlogs(ctx)
			if err != nil {
				gauge(ch, up, 0)
				return
			}
			gauge(ch, up, 1)
			gauge(ch, pending, float64(b.Pending))
			gauge(ch, failed, float64(b.Failed))
			gauge(ch, retry, float64(b.Retry))
		},
	})
}

// WatchBridge reports a bridge's counters (bridge.Stats). Call it at most
// once.
func (m *Metrics) WatchBridge(stats func() bridge.Stats) {
	type field struct {
		desc *prometheus.Desc
		get  func(bridge.Stats) uint64
	}
	c := func(name, help string, get func(bridge.Stats) uint64) field {
		return field{prometheus.NewDesc("jetrelay_bridge_"+name+"_total", help, nil, nil), get}
	}
	fields := []field{
		c("moved", "Ids moved from dispatch:pending into this bridge's processing list.", func(s bridge.Stats) uint64 { return s.Moved }),
		c("published", "Ids JetStream stored as new work items.", func(s bridge.Stats) uint64 { return s.Published }),
		c("duplicates", "Publishes JetStream absorbed as duplicates (a work item already queued, or a delivery already final).", func(s bridge.Stats) uint64 { return s.Duplicates }),
		c("requeued", "Ids pushed again after their earlier work item was consumed, republished under a derived msg id.", func(s bridge.Stats) uint64 { return s.Requeued }),
		c("recovered", "Ids republished from a processing list after a crash (this instance's or an adopted one).", func(s bridge.Stats) uint64 { return s.Recovered }),
		c("adopted", "Ids taken over from dead bridges' processing lists.", func(s bridge.Stats) uint64 { return s.Adopted }),
		c("promoted", "Ids promoted from the reference service's dispatch:retry ZSET.", func(s bridge.Stats) uint64 { return s.Promoted }),
		c("undeferred", "Deliveries an older jetrelay left in jetrelay:deferred, moved into dispatch:pending once at start-up.", func(s bridge.Stats) uint64 { return s.Undeferred }),
		c("quarantined", "Malformed ids moved to dispatch:failed.", func(s bridge.Stats) uint64 { return s.Quarantined }),
		c("parked", "Never-sent deliveries left in Redis (jetrelay:intake:parked:<subscription>) because their subscription is under an intake hold (breaker open, or its sends hanging at its limit).", func(s bridge.Stats) uint64 { return s.Parked }),
		c("unparked", "Parked deliveries put back into dispatch:pending: due, the hold over, or one at a time as a probe.", func(s bridge.Stats) uint64 { return s.Unparked }),
	}
	descs := make([]*prometheus.Desc, len(fields))
	for i, f := range fields {
		descs[i] = f.desc
	}
	m.reg.MustRegister(scraper{descs: descs, collect: func(ch chan<- prometheus.Metric) {
		s := stats()
		for _, f := range fields {
			counterValue(ch, f.desc, f.get(s))
		}
	}})
}

// WatchBreakers reports how many of this replica's per-subscription
// circuit breakers are in each state: counts, never one series per
// subscription. Call it at most once.
func (m *Metrics) WatchBreakers(stats func() engine.BreakerStats) {
	d := prometheus.NewDesc("jetrelay_breakers", "Circuit breakers this replica holds, by state (closed, half_open, open).", []string{"state"}, nil)
	m.reg.MustRegister(scraper{descs: []*prometheus.Desc{d}, collect: func(ch chan<- prometheus.Metric) {
		s := stats()
		gauge(ch, d, float64(s.Closed), "closed")
		gauge(ch, d, float64(s.HalfOpen), "half_open")
		gauge(ch, d, float64(s.Open), "open")
	}})
}

// WatchWork reports the work items this replica's consumer handed to its
// workers, by lane (engine.WorkStats): new work, and work that came back
// (fired wake-ups, redeliveries). Call it at most once.
func (m *Metrics) WatchWork(stats func() engine.WorkStats) {
	d := prometheus.NewDesc("jetrelay_engine_work_items_total", "Work items handed to this replica's workers, by lane: new (first handlings) or back (fired wake-ups and redeliveries).", []string{"lane"}, nil)
	m.reg.MustRegister(scraper{descs: []*prometheus.Desc{d}, collect: func(ch chan<- prometheus.Metric) {
		s := stats()
		counterValue(ch, d, s.New, "new")
		counterValue(ch, d, s.Back, "back")
	}})
}

// WatchParks reports the deliveries this replica parked in memory while
// their subscription was at its in-flight limit here (engine.ParkStats):
// how many wait now, how many parks there were, and how many of them
// ran out of time and were put off. Call it at most once.
func (m *Metrics) WatchParks(stats func() engine.ParkStats) {
	var (
		parked  = prometheus.NewDesc("jetrelay_engine_parked", "Deliveries parked in memory now, waiting for a send of their busy subscription on this replica to end (no record write, no wake-up).", nil, nil)
		parks   = prometheus.NewDesc("jetrelay_engine_parks_total", "Deliveries parked because their subscription was at its in-flight limit on this replica (instead of a subscription_busy put-off).", nil, nil)
		expired = prometheus.NewDesc("jetrelay_engine_park_expired_total", "Parked deliveries whose subscription stayed busy for the park's bound (5 s): handled again, and put off if it still is.", nil, nil)
	)
	m.reg.MustRegister(scraper{descs: []*prometheus.Desc{parked, parks, expired}, collect: func(ch chan<- prometheus.Metric) {
		s := stats()
		gauge(ch, parked, float64(s.Parked))
		counterValue(ch, parks, s.Parks)
		counterValue(ch, expired, s.Expired)
	}})
}

// WatchPool reports the engine's elastic worker pool (engine.PoolStats):
// its size now, the workers busy, and the most it may grow to. Call it at
// most once.
func (m *Metrics) WatchPool(stats func() engine.PoolStats) {
	d := prometheus.NewDesc("jetrelay_engine_workers", "This replica's worker pool, by state: size (now; it follows demand), busy (handling an item), max (JETRELAY_WORKERS or the memory budget's share).", []string{"state"}, nil)
	m.reg.MustRegister(scraper{descs: []*prometheus.Desc{d}, collect: func(ch chan<- prometheus.Metric) {
		s := stats()
		gauge(ch, d, float64(s.Workers), "size")
		gauge(ch, d, float64(s.Busy), "busy")
		gauge(ch, d, float64(s.Max), "max")
	}})
}

// WatchReadiness reports each /readyz check, run at scrape time with all
// checks at once under ScrapeTimeout. Call it at most once.
func (m *Metrics) WatchReadiness(checks map[string]mgmt.Check) {
	d := prometheus.NewDesc("jetrelay_ready", "1 when the readiness check passes, 0 when it fails or does not answer in time (what /readyz reports).", []string{"check"}, nil)
	m.reg.MustRegister(scraper{descs: []*prometheus.Desc{d}, collect: func(ch chan<- prometheus.Metric) {
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
		defer cancel()
		type result struct {
			name string
			ok   bool
		}
		results := make(chan result, len(checks))
		for name, check := range checks {
			go func() { results <- result{name, check(ctx) == nil} }()
		}
		answered := make(map[string]bool, len(checks))
		timeout := time.NewTimer(m.opts.ScrapeTimeout + 50*time.Millisecond)
		defer timeout.Stop()
	collect:
		for range checks {
			select {
			case r := <-results:
				answered[r.name] = r.ok
			case <-timeout.C:
				break collect // a check ignoring its context counts as failing
			}
		}
		for name := range checks {
			gauge(ch, d, boolValue(answered[name]), name)
		}
	}})
}

// WatchReconciler reports the reconciler's counters (reconcile.Stats). All
// read 0 on a healthy system: anything else means a delivery was found in
// no queue, and a hop lost it. Call it at most once.
func (m *Metrics) WatchReconciler(stats func() reconcile.Stats) {
	var (
		requeued = prometheus.NewDesc("jetrelay_reconciler_requeued_total", "Stuck deliveries (neither terminal nor queued anywhere, past the reconcile margin) this bridge put back on dispatch:pending.", nil, nil)
		failed   = prometheus.NewDesc("jetrelay_reconciler_failed_total", "Stuck deliveries this bridge failed at the stale cutoff (MAX_DELIVERY_AGE_MS) instead of putting them back.", nil, nil)
		stuck    = prometheus.NewDesc("jetrelay_reconciler_stuck", "Deliveries the last sweep of this bridge found stuck; they are put back at the next sweep if a second look agrees.", nil, nil)
		sweeps   = prometheus.NewDesc("jetrelay_reconciler_sweeps_total", "Reconcile sweeps this bridge ran while it held the reconciler lease.", nil, nil)
	)
	m.reg.MustRegister(scraper{descs: []*prometheus.Desc{requeued, failed, stuck, sweeps}, collect: func(ch chan<- prometheus.Metric) {
		s := stats()
		counterValue(ch, requeued, s.Requeued)
		counterValue(ch, failed, s.Failed)
		counterValue(ch, sweeps, s.Sweeps)
		ch <- prometheus.MustNewConstMetric(stuck, prometheus.GaugeValue, float64(s.Stuck))
	}})
}
