package engine

import (
	"time"

	"github.com/sony/gobreaker/v2"
)

// Labels describe a delivery for an Observer: only what the reference
// service tags its metrics with. Fields are as found in the records (blank
// when unknown); an Observer decides how to bound and spell them.
type Labels struct {
	// TenantID is the subscription's tenant, blank when the subscription
	// was not read (stale, event or subscription not found), as the
	// reference tags those UNKNOWN.
	TenantID string
	// EventType is the event's type, or the delivery's when the event was
	// not read.
	EventType string
	// Category is the event's category (ownership boundary only).
	Category string
}

// Send is one finished send, as a transport saw it.
type Send struct {
	// Transport is the URL scheme of the transport used ("" when none is
	// registered for the subscription's URL).
	Transport string
	// Outcome is "delivered", "failed" (answered, not accepted),
	// "throttled", "error" (no answer) or "blocked" (refused by the
	// destination policy before any connection).
	Outcome string
	// StatusCode is the protocol status, 0 when there was none.
	StatusCode int
	// Latency is how long the send took.
	Latency time.Duration
	// Queued is how long the work item waited before the handling that
	// sent it began: from its storage in the stream (by the NATS server's
	// clock) through the fetch, the lanes and any wait in its
	// subscription's wait line. It is 0 when not known: for an item
	// delivered before (its time in the stream includes a nak's delay),
	// and when the server's clock is ahead of this one.
	Queued time.Duration
	// Prepared is how long the handling took from its start to the send:
	// the Redis reads, their decoding and the decisions.
	Prepared time.Duration
}

// Observer is told about every send and every decision the engine records,
// for metrics. Methods are called concurrently from the workers and must
// not block. Config.Observer nil means nobody is told.
type Observer interface {
	// Sending: a send is about to start (the reference's attempts counter);
	// every Sending is followed by exactly one Sent.
	Sending(l Labels)
	// Sent: a send finished, whatever its outcome.
	Sent(l Labels, s Send)
	// Decided: a decision about a delivery was recorded (see Decision).
	Decided(d Decision)
	// PayloadInvalid: the event breaks one of the reference validator's
	// rules (warn only: it is delivered anyway). eventType is raw.
	PayloadInvalid(eventType, rule string)
}

// DecisionKind is what the engine decided about a delivery.
type DecisionKind int

// Decisions.
const (
	// Delivered: a success was recorded.
	Delivered DecisionKind = iota
	// Retrying: a failed send was recorded and a retry scheduled.
	Retrying
	// Failed: the delivery was FAILED, after a send or without one.
	Failed
	// Stale: a delivery older than MaxDeliveryAge was failed unsent (the
	// reference counts it apart from the failures).
	Stale
	// PutOff: the delivery waits without using an attempt.
	PutOff
)

// Decision is one decision the engine recorded about a delivery.
type Decision struct {
	Kind   DecisionKind
	Labels Labels
	// Reason is, for Retrying and Failed, one of the reference's reason
	// codes (event_not_found, subscription_not_found,
	// subscription_inactive, http_4xx, http_5xx, transport_error) or
	// jetrelay's ssrf_blocked, boundary_skipped and missing_signing_secret
	// (upstream 0.1.25.24's reason); for PutOff, why:
	// breaker_open, subscription_busy, subscription_<status> (held for a
	// paused or disabled subscription), infra_error or secret_unavailable.
	// A delivery parked in memory for its busy subscription (busyline.go)
	// is not put off and not reported; Engine.ParkStats counts it.
	Reason string
	// StatusCode is the endpoint's status for Delivered (0 when none).
	StatusCode int
	// Latency is the send's duration, 0 when nothing was sent.
	Latency time.Duration
	// Age is, for Delivered, the time from the delivery's attempted_at (its
	// creation) to completion.
	Age time.Duration
	// AutoDisabled marks the Failed decision that disabled the subscription
	// (its tenant is Labels.TenantID).
	AutoDisabled bool
}

// nopObserver stands in for a nil Config.Observer.
type nopObserver struct{}

func (nopObserver) Sending(Labels)                {}
func (nopObserver) Sent(Labels, Send)             {}
func (nopObserver) Decided(Decision)              {}
func (nopObserver) PayloadInvalid(string, string) {}

// BreakerStats counts this replica's circuit breakers by state.
type BreakerStats struct {
	Closed, HalfOpen, Open int
}

// BreakerStats counts the breakers this replica holds by state. A breaker
// whose open period (grown after failed probes) has not ended counts as
// open even when its state machine would already let a probe through. It
// walks every breaker (at most Breaker.MaxBreakers): call it per scrape,
// not per delivery.
func (e *Engine) BreakerStats() BreakerStats {
	s := e.breakers
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	var st BreakerStats
	for _, el := range s.m {
		b := el.Value.(*breaker)
		if until := b.openUntil.Load(); until != 0 && now < until {
			st.Open++
			continue
		}
		switch b.cb.State() {
		case gobreaker.StateOpen:
			st.Open++
		case gobreaker.StateHalfOpen:
			st.HalfOpen++
		default:
			st.Closed++
		}
	}
	return st
}
