package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/store"
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
}

// reasonRetry marks a put-off that is a retry scheduled by the policy.
const reasonRetry = "retry"

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
		// Come back about when a slot should be free again, at least
		// BusyWaitMin from now.
		return nil, putOffReason{later(back, now.Add(e.cfg.BusyWaitMin)), "subscription_busy"}, false
	}
	done, until, ok := e.breakers.admit(sub, now)
	if !ok {
		e.inflight.release(sub, 0, errNotAttempted)
		return nil, putOffReason{until, "breaker_open"}, false
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

// putOff defers a delivery to until without consuming an attempt. It is
// parked in Redis (jetrelay:deferred) and the work item acked, because a
// delayed nak holds one of the consumer's MaxAckPending slots for its whole
// delay: thousands of deliveries waiting on one dead endpoint would starve
// every other subscription. Only a retry's short wait (ParkAfter or less)
// stays in JetStream as a delayed nak, which costs less. The wait never
// extends past the stale cutoff, which must still fail the delivery on time.
func (e *Engine) putOff(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, rec *store.DeliveryRecord, until time.Time, reason string) settlement {
	now := time.Now()
	if stale := attemptedAt(rec.Delivery, now).Add(e.cfg.MaxDeliveryAge + time.Second); until.After(stale) {
		until = stale
	}
	wait := until.Sub(now)
	if reason != reasonRetry {
		// A scheduled retry has its own event, with the failure's reason.
		spanEvent(ctx, eventDeferred, reason, untilAttr(until))
	}
	if wait <= 0 || reason == reasonRetry && wait <= e.cfg.ParkAfter {
		return nakAfter(wait)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if err := e.store.Defer(wctx, rec.DeliveryID, until); err != nil {
		return e.infraRetry(log, md, err)
	}
	if reason != reasonRetry {
		e.obs.Postponed(reason)
	}
	log.Debug("delivery put off", "reason", reason, "until", until)
	return ack()
}
