package engine

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// report is the one place a recorded decision about a delivery is reported:
// the Observer (metrics), the attempt span's event and the log line, so the
// three always agree. until is when a waiting delivery comes back (zero for
// none, or for a hold, which waits for its subscription); err is the
// message behind a failure or a wait, if any; extra are more log fields.
func (e *Engine) report(h *handling, d Decision, until time.Time, err string, extra ...any) {
	d.Labels = h.lab
	if d.Kind != PutOff || (d.Reason != reasonRetry && d.Reason != reasonEarly) {
		e.obs.Decided(d)
	}
	var untilAttrs []attribute.KeyValue
	if !until.IsZero() {
		untilAttrs = []attribute.KeyValue{untilAttr(until)}
	}
	if d.Kind == Delivered {
		spanEvent(h.ctx, eventDelivered, "delivered", attribute.Int("http.response.status_code", d.StatusCode))
		if h.log.enabled(h.ctx, slog.LevelInfo) {
			h.log.Log(h.ctx, slog.LevelInfo, "delivered", []any{"outcome", "success", "status_code", d.StatusCode, "latency_ms", d.Latency.Milliseconds()}, extra...)
		}
		return
	}
	// args[1] is the line's outcome, set below.
	args := append([]any{"outcome", "", "reason", d.Reason}, extra...)
	if err != "" {
		args = append(args, "err", err)
	}
	if !until.IsZero() {
		args = append(args, "until", until)
	}
	// The trace this line belongs to, once per line: attempt adds the
	// outbound one to the handling's fields.
	var traced []any
	if h.rec != nil && h.delivery().TraceID != "" && !h.logTraced {
		traced = []any{"trace_id", h.delivery().TraceID}
	}
	switch d.Kind {
	case Retrying:
		spanEvent(h.ctx, eventRetryScheduled, d.Reason, untilAttrs...)
		args[1] = "retrying"
		h.log.Log(h.ctx, slog.LevelInfo, "delivery attempt failed; retry scheduled", traced, args...)
	case Failed, Stale:
		spanEvent(h.ctx, eventFailed, d.Reason)
		args[1] = "failed"
		h.log.Log(h.ctx, slog.LevelWarn, "delivery failed", traced, args...)
	case PutOff:
		if d.Reason != reasonRetry {
			// A retry's wait was reported with its failure (Retrying).
			spanEvent(h.ctx, eventDeferred, d.Reason, untilAttrs...)
		}
		level := slog.LevelDebug
		switch d.Reason {
		case "infra_error":
			level = slog.LevelWarn
		case "secret_unavailable":
			level = slog.LevelError
		}
		args[1] = "put_off"
		h.log.Log(h.ctx, level, "delivery put off", traced, args...)
	}
}
