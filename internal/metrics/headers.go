package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetrelay/jetrelay/engine"
)

var _ = engine.HeaderDropObserver((*Metrics)(nil))

// newHeadersDropped is jetrelay_custom_headers_dropped_total{header}.
func newHeadersDropped(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jetrelay_custom_headers_dropped_total",
		Help: "Reserved custom headers of a subscription (Content-Type, User-Agent, X-Cycles-*, X-Request-Id, traceparent, hop-by-hop) left out of a send, by lowercase name; the delivery still goes out (upstream 0.1.25.18).",
	}, []string{"header"})
	reg.MustRegister(c)
	return c
}

// HeaderDropped counts one reserved custom header left out of a send
// (engine.HeaderDropObserver). The reserved names are a fixed list except
// the X-Cycles-* family, whose unknown members share one label value.
func (m *Metrics) HeaderDropped(_ engine.Labels, name string) {
	lower := strings.ToLower(name)
	switch lower {
	case "x-cycles-event-id", "x-cycles-event-type", "x-cycles-trace-id", "x-cycles-signature":
	default:
		if strings.HasPrefix(lower, "x-cycles-") {
			lower = "x-cycles-*"
		}
	}
	m.headersDropped.WithLabelValues(lower).Inc()
}
