package metrics

import (
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/transport"
)

// The closed vocabularies of the labels the engine fills.
var (
	failedReasons = set("event_not_found", "subscription_not_found", "subscription_inactive",
		"http_4xx", "http_5xx", "transport_error", "ssrf_blocked", "boundary_skipped", "missing_signing_secret")
	sendOutcomes     = set("delivered", "failed", "throttled", "error", "blocked")
	postponeReasons  = set("breaker_open", "subscription_busy", "subscription_paused", "subscription_disabled", "infra_error", "secret_unavailable")
	validatorRules   = set("missing_required", "unknown_event_type", "unknown_category", "category_mismatch", "trace_id_shape", "budget_data_shape", "reset_spent_shape")
	_                = engine.Observer((*Metrics)(nil))
	statusFamilyName = [...]string{2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}
)

// labels returns the reference label values for l, led by the tenant when
// the tenant tag is on.
func (m *Metrics) labels(l engine.Labels, more ...string) []string {
	out := make([]string, 0, 2+len(more))
	if m.opts.TenantTag {
		out = append(out, m.tenants.value(l.TenantID))
	}
	out = append(out, m.eventTypes.value(l.EventType))
	return append(out, more...)
}

// key is the childKey of labels(l, last...): l's label values, capped, then
// last when given.
func (m *Metrics) key(l engine.Labels, last ...string) childKey {
	var k childKey
	i := 0
	if m.opts.TenantTag {
		k[i] = m.tenants.value(l.TenantID)
		i++
	}
	k[i] = m.eventTypes.value(l.EventType)
	if len(last) > 0 {
		k[i+1] = last[0]
	}
	return k
}

// Sending counts a send starting (engine.Observer).
func (m *Metrics) Sending(l engine.Labels) {
	m.attemptsBy.get(m.key(l)).Inc()
	m.inFlight.Inc()
}

// Sent counts a finished send by transport and outcome (engine.Observer).
func (m *Metrics) Sent(_ engine.Labels, s engine.Send) {
	m.inFlight.Dec()
	tr := "none"
	if s.Transport != "" {
		tr = m.transports.value(s.Transport)
	}
	m.sendsBy.get(childKey{tr, oneOf(s.Outcome, sendOutcomes)}).Inc()
	if s.Transport != "" {
		m.sendTimesBy.get(childKey{tr}).Observe(s.Latency.Seconds())
	}
	if s.Queued > 0 {
		m.queueWait.Observe(s.Queued.Seconds())
	}
	m.prepareWait.Observe(s.Prepared.Seconds())
}

// Decided counts a recorded decision in the reference's series
// (engine.Observer): a success, a failed send and its retry, a failure, a
// stale delivery, an auto-disable, a put-off.
func (m *Metrics) Decided(d engine.Decision) {
	switch d.Kind {
	case engine.Delivered:
		m.succeeded(d.Labels, d.StatusCode, d.Latency, d.Age)
	case engine.Retrying:
		m.failed(d.Labels, d.Reason, d.Latency)
		m.retried.WithLabelValues(m.labels(d.Labels)...).Inc()
	case engine.Failed:
		m.failed(d.Labels, d.Reason, d.Latency)
		if d.AutoDisabled {
			m.autoDisabledOnce(d.Labels.TenantID)
		}
	case engine.Stale:
		m.stale1()
	case engine.PutOff:
		m.postponed.WithLabelValues(oneOf(d.Reason, postponeReasons)).Inc()
	}
}

// succeeded counts a recorded success, its latency and the delivery's age.
// The reference records the latency even when it is 0.
func (m *Metrics) succeeded(l engine.Labels, statusCode int, latency, age time.Duration) {
	m.successBy.get(m.key(l, statusFamily(statusCode))).Inc()
	m.observeLatency(l, "success", latency)
	m.age.Observe(max(age, 0).Seconds())
}

// failed counts a failed send or a failure without a send. As in the
// reference, a failure's latency is recorded only when positive.
func (m *Metrics) failed(l engine.Labels, reason string, latency time.Duration) {
	reason = m.failedReason(reason)
	m.failedTotal.WithLabelValues(m.labels(l, reason)...).Inc()
	if latency > 0 {
		m.observeLatency(l, "failure", latency)
	}
	if reason == "boundary_skipped" {
		m.boundary.WithLabelValues(m.eventTypes.value(l.EventType), m.categories.value(l.Category)).Inc()
	}
}

// maxAnswerReasons caps the distinct transport answer reasons (nats_*, sqs_*,
// a plugin's) that keep their own failed series.
const maxAnswerReasons = 32

// failedReason is reason as a label value: one of the engine's fixed
// reasons, or a transport's answer reason (transport.ValidReason) among the
// first maxAnswerReasons seen; Other otherwise.
func (m *Metrics) failedReason(reason string) string {
	if failedReasons[reason] {
		return reason
	}
	if transport.ValidReason(reason) || reason == transport.ReasonOther {
		return m.answers.value(reason)
	}
	return Other
}

func (m *Metrics) observeLatency(l engine.Labels, outcome string, latency time.Duration) {
	s := m.latencyBy.get(m.key(l, outcome))
	s.summary.Observe(latency.Seconds())
	m.latencyMax.observeRing(s.max, latency.Seconds())
}

// stale1 counts a delivery failed for its age; the reference tags it with
// tenant UNKNOWN whatever the subscription.
func (m *Metrics) stale1() {
	if m.opts.TenantTag {
		m.stale.WithLabelValues(Unknown).Inc()
		return
	}
	m.stale.WithLabelValues().Inc()
}

// autoDisabledOnce counts a subscription disabled after consecutive
// failures.
func (m *Metrics) autoDisabledOnce(tenantID string) {
	if m.opts.TenantTag {
		m.autoDisabled.WithLabelValues(m.tenants.value(tenantID), "consecutive_failures").Inc()
		return
	}
	m.autoDisabled.WithLabelValues("consecutive_failures").Inc()
}

// PayloadInvalid counts one broken validator rule (engine.Observer); the
// reference's type label is the raw event type, never the tenant.
func (m *Metrics) PayloadInvalid(eventType, rule string) {
	m.payloadInvalid.WithLabelValues(m.eventTypes.value(eventType), oneOf(rule, validatorRules)).Inc()
}

// statusFamily is the reference's status_code_family: 2xx…5xx, UNKNOWN
// for anything else (no status at all included).
func statusFamily(code int) string {
	if f := code / 100; code >= 200 && code < 600 {
		return statusFamilyName[f]
	}
	return Unknown
}
