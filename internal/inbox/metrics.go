package inbox

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the inbox's Prometheus series, served on the management
// address (--management-listen) at /metrics. The status gauge is read from
// PostgreSQL at scrape time, so every replica reports the whole inbox.
type metrics struct {
	reg      *prometheus.Registry
	intake   *prometheus.CounterVec
	forwards *prometheus.CounterVec
	latency  prometheus.Histogram
}

// Intake and forward results, the values of the result label.
const (
	resultAccepted   = "accepted"
	resultDuplicate  = "duplicate"
	resultRefused    = "refused"
	resultInvalid    = "invalid"
	resultError      = "error"
	resultDone       = "done"
	resultFailed     = "failed"
	resultDeadLetter = "dead_letter"
)

func newMetrics(store *Store) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		intake: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetrelay_inbox_intake_total",
			Help: "Deliveries the intake answered, by result: accepted (stored), duplicate, refused (signature), invalid (size, id, method), error (not stored).",
		}, []string{"result"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetrelay_inbox_forwards_total",
			Help: "Forward attempts by result: done, failed (will retry), dead_letter (gave up).",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jetrelay_inbox_intake_seconds",
			Help:    "Time from a delivery's arrival to its answer, for stored deliveries (verify + committed insert).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
	}
	m.reg.MustRegister(m.intake, m.forwards, m.latency, statusCollector{store: store})
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// statusCollector reports how many events are in each status.
type statusCollector struct{ store *Store }

var statusDesc = prometheus.NewDesc("jetrelay_inbox_events", "Events in the inbox by status (dead_letter needs a person).", []string{"status"}, nil)

func (c statusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- statusDesc }

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.store.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(statusDesc, err)
		return
	}
	for _, st := range Statuses {
		ch <- prometheus.MustNewConstMetric(statusDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}
