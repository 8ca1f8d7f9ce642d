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
}

// Observer is told about every delivery decision at the point the engine
// makes it, for metrics. Methods are called concurrently from the workers
// and must not block. Config.Observer nil means nobody is told.
type Observer interface {
	// Attempted: a send is about to start (the reference's attempts counter).
	Attempted(l Labels)
	// Sent: a send finished, whatever its outcome; every Attempted is
	// followed by exactly one Sent.
	Sent(l Labels, s Send)
	// Succeeded: a success is recorded. age is from the delivery's
	// attempted_at (its creation) to completion.
	Succeeded(l Labels, statusCode int, latency, age time.Duration)
	// Failed: a failed send was recorded (a retry or the final failure),
	// or the delivery failed without a send. reason is one of the
	// reference's reason codes (event_not_found, subscription_not_found,
	// subscription_inactive, http_4xx, http_5xx, transport_error) or
	// jetrelay's ssrf_blocked and boundary_skipped. latency is 0 when
	// nothing was sent.
	Failed(l Labels, reason string, latency time.Duration)
	// Retried: a retry was scheduled after a failed send.
	Retried(l Labels)
	// Stale: a delivery older than MaxDeliveryAge was failed unsent.
	Stale(l Labels)
	// AutoDisabled: the subscription was disabled after consecutive
	// failures; tenantID is its tenant.
	AutoDisabled(tenantID string)
	// PayloadInvalid: the event breaks one of the reference validator's
	// rules (warn only: it is delivered anyway). eventType is raw.
	PayloadInvalid(eventType, rule string)
	// Postponed: a delivery waits without using an attempt: reason is
	// breaker_open, subscription_busy, subscription_<status> (a paused or
	// disabled subscription), infra_error or secret_unavailable.
	Postponed(reason string)
}

// nopObserver stands in for a nil Config.Observer.
type nopObserver struct{}

func (nopObserver) Attempted(Labels)                                    {}
func (nopObserver) Sent(Labels, Send)                                   {}
func (nopObserver) Succeeded(Labels, int, time.Duration, time.Duration) {}
func (nopObserver) Failed(Labels, string, time.Duration)                {}
func (nopObserver) Retried(Labels)                                      {}
func (nopObserver) Stale(Labels)                                        {}
func (nopObserver) AutoDisabled(string)                                 {}
func (nopObserver) PayloadInvalid(string, string)                       {}
func (nopObserver) Postponed(string)                                    {}

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
