package engine

import (
	"slices"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"
)

// SubscriptionBreaker is one subscription's circuit breaker on this
// replica that is not closed.
type SubscriptionBreaker struct {
	SubscriptionID string
	// Open is true while the breaker holds deliveries back; false means
	// half-open (one probe may go).
	Open bool
	// OpenUntil is when an open breaker lets its next probe through.
	OpenUntil time.Time
}

// SubscriptionLimit is one subscription's current in-flight limit on this
// replica and how many sends to it are running.
type SubscriptionLimit struct {
	SubscriptionID string
	Limit          int
	InFlight       int
}

// OpenBreakers lists this replica's breakers that are open or half-open,
// by subscription id, for operators (`jetrelay status`, the management
// port's /status). Like BreakerStats it walks every breaker: call it per
// request, not per delivery.
func (e *Engine) OpenBreakers() []SubscriptionBreaker {
	s := e.breakers
	now := time.Now().UnixNano()
	s.mu.Lock()
	var out []SubscriptionBreaker
	for id, el := range s.m {
		b := el.Value.(*breaker)
		until := b.openUntil.Load()
		switch {
		case until != 0 && now < until:
			out = append(out, SubscriptionBreaker{SubscriptionID: id, Open: true, OpenUntil: time.Unix(0, until)})
		case b.cb.State() == gobreaker.StateOpen:
			out = append(out, SubscriptionBreaker{SubscriptionID: id, Open: true})
		case b.cb.State() == gobreaker.StateHalfOpen:
			out = append(out, SubscriptionBreaker{SubscriptionID: id})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b SubscriptionBreaker) int { return strings.Compare(a.SubscriptionID, b.SubscriptionID) })
	return out
}

// Limits lists the in-flight limit of every subscription this replica is
// sending to (or has deliveries waiting for a slot) right now. Idle
// subscriptions are not listed: their limit is the configured maximum.
func (e *Engine) Limits() []SubscriptionLimit {
	l := e.inflight
	l.mu.Lock()
	out := make([]SubscriptionLimit, 0, len(l.m))
	for id, s := range l.m {
		out = append(out, SubscriptionLimit{SubscriptionID: id, Limit: l.max, InFlight: len(s.slots)})
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b SubscriptionLimit) int { return strings.Compare(a.SubscriptionID, b.SubscriptionID) })
	return out
}
