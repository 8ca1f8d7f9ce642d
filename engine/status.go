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
