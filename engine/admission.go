package engine

import (
	"context"
	"time"
)

// admission is a subscription's permission for one send: a slot under its
// in-flight limit and its circuit breaker's consent. close must be called
// once; until sent is called it reports "no attempt" to the breaker.
type admission struct {
	e      *Engine
	sub    string
	done   func(error)
	result error
	took   time.Duration
	// lastChance marks the one send of a delivery through an open breaker
	// at the end of its schedule: its failure is final.
	lastChance bool
}

// Reasons of a wait that are not reported as put-offs of their own.
const (
	// reasonRetry marks a retry scheduled by the policy after a failed send.
	reasonRetry = "retry"
	// reasonEarly marks an early copy of a delivery that already waits
	// (its record names the time).
	reasonEarly = "early_copy"
	// reasonBreakerOpen is the put-off of a delivery whose subscription's
	// circuit breaker is open.
	reasonBreakerOpen = "breaker_open"
	// reasonBusy is the put-off of a delivery whose subscription is at its
	// in-flight limit, when it cannot be parked (busyline.go).
	reasonBusy = "subscription_busy"
)

// putOffReason says why and until when a delivery is put off.
type putOffReason struct {
	until  time.Time
	reason string
}

// admit takes an in-flight slot and the breaker's consent for a send to
// subscription sub, or says how long to put the delivery off.
func (e *Engine) admit(ctx context.Context, sub string, now time.Time) (*admission, putOffReason, bool) {
	ok, back := e.inflight.acquire(ctx, sub)
	if !ok {
		// Come back about when a slot should be free again (wait adds
		// the floor of a busy put-off).
		return nil, putOffReason{back, reasonBusy}, false
	}
	done, until, ok := e.breakers.admit(sub, now)
	if !ok {
		e.inflight.release(sub, 0, errNotAttempted)
		return nil, putOffReason{until, reasonBreakerOpen}, false
	}
	return &admission{e: e, sub: sub, done: done, result: errNotAttempted}, putOffReason{}, true
}

// sent records the attempt's result for the breaker and the latency for
// the in-flight limiter.
func (a *admission) sent(o outcome) {
	a.result = o.breakerResult()
	a.took = o.res.Latency
}

func (a *admission) close() {
	a.done(a.result)
	a.e.inflight.release(a.sub, a.took, a.result)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
