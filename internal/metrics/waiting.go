package metrics

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// WatchWaiting reports the work that waits in the dispatch stream, counted
// by JetStream (queue.CountWaiting: one consumer info per kind, whatever
// the number of waiting deliveries), at every scrape. Every replica reports
// the same shared values: aggregate with max, not sum. Call it at most once.
func (m *Metrics) WatchWaiting(js jetstream.JetStream, qc queue.Config) {
	var (
		up        = prometheus.NewDesc("jetrelay_waiting_info_up", "1 when the last scrape could count the waiting work in JetStream, 0 when it could not.", nil, nil)
		scheduled = prometheus.NewDesc("jetrelay_scheduled_wakeups", "Pending JetStream message schedules: retries waiting for their backoff, deliveries put off by an open breaker or a busy subscription, and held-checks.", nil, nil)
		held      = prometheus.NewDesc("jetrelay_held_deliveries", "Deliveries held in JetStream for a PAUSED or DISABLED subscription, released when it is ACTIVE again or failed at the stale cutoff.", nil, nil)
	)
	m.reg.MustRegister(scraper{
		descs: []*prometheus.Desc{up, scheduled, held},
		collect: func(ch chan<- prometheus.Metric) {
			ctx, cancel := context.WithTimeout(context.Background(), m.opts.ScrapeTimeout)
			defer cancel()
			w, err := queue.CountWaiting(ctx, js, qc)
			if err != nil {
				gauge(ch, up, 0)
				return
			}
			gauge(ch, up, 1)
			gauge(ch, scheduled, float64(w.Scheduled))
			gauge(ch, held, float64(w.Held))
		},
	})
}
