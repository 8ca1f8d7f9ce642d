package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetrelay/jetrelay/engine"
)

// limitBuckets are the upper bounds of jetrelay_subscription_limit: powers
// of two up to 1024 workers, so one series per bucket whatever the number
// of subscriptions.
var limitBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// WatchLimits reports the adaptive in-flight limits of the subscriptions
// this replica sent to in the last ten seconds, read at scrape time from
// limits (engine.Engine.Limits): a histogram over the limits and the
// largest one, never one series per subscription (which ones are busy is
// the operator view's business). Call it at most once.
func (m *Metrics) WatchLimits(limits func() []engine.SubscriptionLimit) {
	hist := prometheus.NewDesc("jetrelay_subscription_limit",
		"Adaptive in-flight limits of the subscriptions this replica sent to in the last 10s (count: how many were busy).", nil, nil)
	top := prometheus.NewDesc("jetrelay_subscription_limit_max",
		"The largest adaptive in-flight limit among the subscriptions this replica sent to in the last 10s (0: none).", nil, nil)
	inflight := prometheus.NewDesc("jetrelay_subscription_in_flight_max",
		"The most sends this replica runs to one subscription now.", nil, nil)
	m.reg.MustRegister(scraper{descs: []*prometheus.Desc{hist, top, inflight}, collect: func(ch chan<- prometheus.Metric) {
		ls := limits()
		counts := make(map[float64]uint64, len(limitBuckets))
		var sum float64
		largest, busiest := 0, 0
		for _, l := range ls {
			sum += float64(l.Limit)
			largest, busiest = max(largest, l.Limit), max(busiest, l.InFlight)
			for _, b := range limitBuckets {
				if float64(l.Limit) <= b {
					counts[b]++ // cumulative, as Prometheus buckets are
				}
			}
		}
		ch <- prometheus.MustNewConstHistogram(hist, uint64(len(ls)), sum, counts)
		gauge(ch, top, float64(largest))
		gauge(ch, inflight, float64(busiest))
	}})
}
