package inbox

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/jetrelay/jetrelay/transport/receive"
)

// notStored are request headers the inbox never writes to disk: credentials
// of whatever sits in front of it.
var notStored = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// Intake is the inbox's HTTP handler: verify, store, answer. It answers 202
// for a new event, 200 for one already in the inbox, 401 for a missing or
// wrong signature, 413 past the body limit, 400 without an event id, 405
// for anything but POST and 503 when PostgreSQL did not commit the row. It
// does nothing else: forwarding is the workers' job.
type Intake struct {
	store    *Store
	verifier *receive.Verifier
	maxBody  int64
	log      *slog.Logger
	wake     func() // tells local workers there is work; may be nil
	metrics  *metrics
}

// ServeHTTP implements http.Handler.
func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if r.Method != http.MethodPost {
		in.metrics.intake.WithLabelValues(resultInvalid).Inc()
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, status := receive.ReadBody(w, r, in.maxBody)
	if status != 0 {
		in.metrics.intake.WithLabelValues(resultInvalid).Inc()
		http.Error(w, http.StatusText(status), status)
		return
	}
	id := receive.IdentityFromHTTP(r.Header)
	// Either scheme: X-Cycles-Signature, or Standard Webhooks with its
	// replay check (receive.Verifier.VerifyIdentity).
	if err := in.verifier.VerifyIdentity(body, id); err != nil {
		in.metrics.intake.WithLabelValues(resultRefused).Inc()
		in.log.Warn("inbox: refused a delivery", "reason", err, "remote", r.RemoteAddr)
		http.Error(w, "invalid or missing signature (X-Cycles-Signature or webhook-signature), or a stale webhook-timestamp", http.StatusUnauthorized)
		return
	}
	if !receive.ValidEventID(id.EventID) {
		in.metrics.intake.WithLabelValues(resultInvalid).Inc()
		http.Error(w, "missing or invalid X-Cycles-Event-Id", http.StatusBadRequest)
		return
	}
	header := r.Header.Clone()
	for _, h := range notStored {
		header.Del(h)
	}
	fresh, err := in.store.Insert(r.Context(), id.EventID, id.EventType, header, body)
	if err != nil {
		in.metrics.intake.WithLabelValues(resultError).Inc()
		in.log.Error("inbox: store event", "event_id", id.EventID, "err", err)
		w.Header().Set("Retry-After", "5")
		http.Error(w, "inbox unavailable", http.StatusServiceUnavailable)
		return
	}
	in.metrics.latency.Observe(time.Since(start).Seconds())
	if !fresh {
		in.metrics.intake.WithLabelValues(resultDuplicate).Inc()
		w.WriteHeader(http.StatusOK)
		return
	}
	in.metrics.intake.WithLabelValues(resultAccepted).Inc()
	if in.wake != nil {
		in.wake()
	}
	w.WriteHeader(http.StatusAccepted)
}
