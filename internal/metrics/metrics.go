package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options tunes a Metrics. Zero values take the defaults.
type Options struct {
	// TenantTag adds the tenant label to the reference series, as
	// cycles.metrics.tenant-tag.enabled does upstream (off by default
	// since upstream 0.1.25.20: one series per tenant is costly).
	TenantTag bool
	// MaxEventTypes caps the distinct event_type (and payload type)
	// label values; later ones are reported as "other". Default 200.
	MaxEventTypes int
	// MaxTenants caps the distinct tenant label values. Default 1000.
	MaxTenants int
	// ScrapeTimeout bounds each on-demand read (JetStream consumer info,
	// Redis lengths, readiness checks) during a scrape. Default 500ms.
	ScrapeTimeout time.Duration
	// Version is reported by jetrelay_build_info.
	Version string
}

func (o Options) withDefaults() Options {
	if o.MaxEventTypes <= 0 {
		o.MaxEventTypes = 200
	}
	if o.MaxTenants <= 0 {
		o.MaxTenants = 1000
	}
	if o.ScrapeTimeout <= 0 {
		o.ScrapeTimeout = 500 * time.Millisecond
	}
	if o.Version == "" {
		o.Version = "unknown"
	}
	return o
}

// Metrics is one process's metrics: its own registry (nothing is
// registered globally), the delivery series the engine feeds through the
// engine.Observer methods, and the collectors the Watch methods add. It is
// safe for concurrent use.
type Metrics struct {
	opts       Options
	reg        *prometheus.Registry
	eventTypes *capped
	tenants    *capped
	categories *capped
	transports *capped
	// answers are the transports' own reasons for a non-HTTP answer
	// (transport.Result.Reason): constants of their code, capped anyway.
	answers *capped

	attempts       *prometheus.CounterVec
	success        *prometheus.CounterVec
	failedTotal    *prometheus.CounterVec
	retried        *prometheus.CounterVec
	stale          *prometheus.CounterVec
	autoDisabled   *prometheus.CounterVec
	latency        *prometheus.SummaryVec
	latencyMax     *windowMax
	payloadInvalid *prometheus.CounterVec
	boundary       *prometheus.CounterVec
	headersDropped *prometheus.CounterVec

	// The children of the vectors above that every delivery touches
	// (children.go).
	attemptsBy  *children[prometheus.Counter]
	successBy   *children[prometheus.Counter]
	latencyBy   *children[latencySeries]
	sendsBy     *children[prometheus.Counter]
	sendTimesBy *children[prometheus.Observer]

	sends        *prometheus.CounterVec
	sendDuration *prometheus.HistogramVec
	// sendWait is the time before a send, by stage: the work item's wait
	// (queue) and its handling's reads and decisions (prepare).
	sendWait    *prometheus.HistogramVec
	queueWait   prometheus.Observer
	prepareWait prometheus.Observer
	inFlight    prometheus.Gauge
	age         prometheus.Histogram
	postponed   *prometheus.CounterVec
}

// New returns a Metrics with the delivery series and the Go runtime and
// process collectors registered.
func New(opts Options) *Metrics {
	opts = opts.withDefaults()
	m := &Metrics{
		opts:       opts,
		reg:        prometheus.NewRegistry(),
		eventTypes: newCapped(opts.MaxEventTypes),
		tenants:    newCapped(opts.MaxTenants),
		categories: newCapped(32),
		transports: newCapped(32),
		answers:    newCapped(maxAnswerReasons),
	}
	// The tenant label exists only when enabled, as upstream.
	withTenant := func(labels ...string) []string {
		if opts.TenantTag {
			return append([]string{"tenant"}, labels...)
		}
		return labels
	}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		m.reg.MustRegister(c)
		return c
	}
	m.attempts = counter("cycles_webhook_delivery_attempts_total", "Sends started (reference cycles.webhook.delivery.attempts).", withTenant("event_type"))
	m.success = counter("cycles_webhook_delivery_success_total", "Deliveries recorded SUCCESS (reference cycles.webhook.delivery.success).", withTenant("event_type", "status_code_family"))
	m.failedTotal = counter("cycles_webhook_delivery_failed_total", "Failed sends (every failed attempt) and deliveries failed without a send, by reason (reference cycles.webhook.delivery.failed; jetrelay adds ssrf_blocked and boundary_skipped).", withTenant("event_type", "reason"))
	m.retried = counter("cycles_webhook_delivery_retried_total", "Retries scheduled after a failed send (reference cycles.webhook.delivery.retried).", withTenant("event_type"))
	m.stale = counter("cycles_webhook_delivery_stale_total", "Deliveries failed unsent for being older than MAX_DELIVERY_AGE_MS (reference cycles.webhook.delivery.stale; tenant always UNKNOWN).", withTenant())
	m.autoDisabled = counter("cycles_webhook_subscription_auto_disabled_total", "Subscriptions disabled after consecutive failed deliveries (reference cycles.webhook.subscription.auto_disabled).", withTenant("reason"))
	m.payloadInvalid = counter("cycles_webhook_events_payload_invalid_total", "Events breaking a rule of the reference payload validator, delivered anyway (reference cycles.webhook.events.payload.invalid).", []string{"type", "rule"})
	m.headersDropped = newHeadersDropped(m.reg)
	m.boundary = counter("cycles_webhook_delivery_boundary_skipped_total", "Deliveries of admin-only events to tenant-owned subscriptions failed at the ownership boundary (upstream 0.1.25.23).", []string{"event_type", "category"})

	// A Micrometer Timer is exposed as a summary without quantiles
	// (_count, _sum) plus a decaying _max gauge; the same shape here.
	m.latency = prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Name: "cycles_webhook_delivery_latency_seconds",
		Help: "Send latency of recorded outcomes (reference cycles.webhook.delivery.latency; failures only when > 0).",
	}, withTenant("event_type", "outcome"))
	m.latencyMax = newWindowMax("cycles_webhook_delivery_latency_seconds_max",
		"Largest send latency in the last two minutes (Micrometer's Timer max).", withTenant("event_type", "outcome"))
	m.reg.MustRegister(m.latency, m.latencyMax)

	m.sends = counter("jetrelay_transport_sends_total", "Sends by transport (URL scheme) and outcome: delivered, failed (answered, not accepted), throttled, error (no answer), blocked (destination policy).", []string{"transport", "outcome"})
	m.sendDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jetrelay_transport_send_duration_seconds",
		Help:    "Duration of sends by transport (URL scheme).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"transport"})
	m.sendWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "jetrelay_send_wait_seconds",
		Help: "Time before a send, by stage: queue, from the work item's storage in the stream to the start of its handling (first deliveries of an item only); " +
			"prepare, from there to the send (the Redis reads and the decisions).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"stage"})
	m.queueWait, m.prepareWait = m.sendWait.WithLabelValues("queue"), m.sendWait.WithLabelValues("prepare")
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "jetrelay_sends_in_flight", Help: "Sends running now in this replica."})
	m.age = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "jetrelay_delivery_age_seconds",
		Help:    "Age of a delivery when it succeeded: completed_at minus attempted_at (its creation by admin).",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400},
	})
	m.reg.MustRegister(m.sendDuration, m.sendWait, m.inFlight, m.age)
	perDelivery := 1 // event_type, led by the tenant with the tag
	if opts.TenantTag {
		perDelivery++
	}
	m.attemptsBy = newChildren(perDelivery, func(lvs []string) prometheus.Counter { return m.attempts.WithLabelValues(lvs...) })
	m.successBy = newChildren(perDelivery+1, func(lvs []string) prometheus.Counter { return m.success.WithLabelValues(lvs...) })
	m.latencyBy = newChildren(perDelivery+1, func(lvs []string) latencySeries {
		return latencySeries{summary: m.latency.WithLabelValues(lvs...), max: m.latencyMax.ring(lvs)}
	})
	m.sendsBy = newChildren(2, func(lvs []string) prometheus.Counter { return m.sends.WithLabelValues(lvs...) })
	m.sendTimesBy = newChildren(1, func(lvs []string) prometheus.Observer { return m.sendDuration.WithLabelValues(lvs...) })
	m.postponed = counter("jetrelay_deliveries_postponed_total", "Deliveries put off without using an attempt, by reason: breaker_open, subscription_busy, subscription_paused, subscription_disabled, infra_error, secret_unavailable.", []string{"reason"})

	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "jetrelay_build_info", Help: "Always 1; the version label says which jetrelay runs.",
		ConstLabels: prometheus.Labels{"version": opts.Version},
	})
	buildInfo.Set(1)
	m.reg.MustRegister(buildInfo, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Series an alert uses with increase() exist from the start at 0.
	if opts.TenantTag {
		m.stale.WithLabelValues(Unknown)
	} else {
		m.stale.WithLabelValues()
		m.autoDisabled.WithLabelValues("consecutive_failures")
	}
	return m
}

// Registry is the registry every series is in, for tests and embedders.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format. A collector that fails leaves its series out of that scrape
// instead of failing the whole scrape.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
