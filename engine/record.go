package engine

import (
	"errors"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// writeTimeout bounds one outcome write. Outcomes are written on a context
// detached from shutdown: a send that completed must be recorded even when
// the drain deadline has just passed, or it would be sent again.
const writeTimeout = 10 * time.Second

// outcome is what one send produced.
type outcome struct {
	attempt int
	res     transport.Result
	err     error
	traceID string // the event's trace_id, copied into a delivery that has none
	// lastChance marks a send through an open breaker at the end of the
	// delivery's schedule (admitThrough): a failure is final.
	lastChance bool
}

// message is the delivery's error_message for a failed send: "HTTP <code>"
// for an answer, the transport's error otherwise.
func (o outcome) message() string {
	if o.err != nil {
		return o.err.Error()
	}
	return o.res.Message
}

// reason is the reference service's metric reason for a failed send, or
// the transport's own reason for a non-HTTP answer (Result.Reason).
func (o outcome) reason() string {
	switch c := o.res.StatusCode; {
	case o.blocked():
		return "ssrf_blocked"
	case o.err != nil:
		return "transport_error"
	case o.res.Reason != "":
		// A non-HTTP protocol's own answer: "answered no", not "no answer".
		return transport.AnswerReason(o.res)
	case c >= 400 && c < 500:
		return "http_4xx"
	case c >= 500 && c < 600:
		return "http_5xx"
	}
	return "transport_error"
}

// class is what the send means for the delivery, read by the one
// definition every transport's conformance tests use (transport.Classify),
// and the wait a throttling destination asked for.
func (o outcome) class() (transport.Class, time.Duration) {
	return transport.Classify(o.res, o.err)
}

// accepted reports a send the destination took.
func (o outcome) accepted() bool {
	c, _ := o.class()
	return c == transport.Accepted
}

// sendOutcome classifies the send for Observer.Sent.
func (o outcome) sendOutcome() string {
	switch {
	case o.blocked():
		return "blocked"
	case o.err != nil:
		return "error"
	}
	switch c, _ := o.class(); c {
	case transport.Accepted:
		return "delivered"
	case transport.Throttle:
		return "throttled"
	}
	return "failed"
}

func (o outcome) permanent() bool {
	c, _ := o.class()
	return c == transport.Fatal
}

// blocked reports a send the destination policy refused (SSRF guard): the
// subscription's URL, not its endpoint's health, is at fault, so like the
// reference (0.1.25.22) it is not counted toward auto-disable.
func (o outcome) blocked() bool { return errors.Is(o.err, transport.ErrBlocked) }

// breakerResult is what the attempt tells the subscription's breaker: nil
// when the endpoint answered (even with a 4xx: it is up), errFailedAttempt
// when it did not answer or answered that it is failing or overloaded (5xx,
// 408, 429, a throttle), errNotAttempted when the request could never have
// worked (a permanent error says nothing about the endpoint's health).
func (o outcome) breakerResult() error {
	switch c, _ := o.class(); {
	case c == transport.Fatal:
		return errNotAttempted
	case o.err != nil, c == transport.Throttle:
		return errFailedAttempt
	case c == transport.Accepted:
		return nil
	}
	switch c := o.res.StatusCode; {
	case c >= 500, c == 408, c == 429, c == 0:
		return errFailedAttempt
	}
	return nil
}

// superseded reports whether cur no longer needs this attempt's outcome: it
// is final, or another copy of the work item already recorded this attempt
// number (a duplicate work item racing this one).
func (o outcome) superseded(cur *proto.Delivery) bool {
	return cur.Status.Terminal() || cur.Attempts >= o.attempt
}

// attemptFields are the fields every attempt writes, in the order the
// reference service's Delivery model has them.
func (o outcome) attemptFields(d *proto.Delivery, status proto.DeliveryStatus) store.Patch {
	p := store.Patch{
		{Name: "status", Value: status},
		{Name: "attempts", Value: o.attempt},
		{Name: "response_status", Value: o.res.StatusCode},
		{Name: "response_time_ms", Value: o.res.Latency.Milliseconds()},
	}
	if d.TraceID == "" && o.traceID != "" {
		// Fill a missing trace id from the event; never overwrite one admin wrote.
		p = append(p, store.Field{Name: "trace_id", Value: o.traceID})
	}
	return p
}

// write records an outcome on a context that survives shutdown, bounded.
// subRaw is the subscription's stored bytes when the write may change it.
func (e *Engine) write(h *handling, subRaw []byte, fn store.OutcomeFunc) (bool, error) {
	return e.writeAndSave(h, subRaw, nil, fn)
}

// waitCleared is the patch that drops a wait note once the delivery is sent
// or final.
func waitCleared(cur *proto.Delivery) store.Patch {
	if cur.Waiting == nil {
		return nil
	}
	return store.Patch{{Name: "jetrelay_waiting", Value: nil}}
}

// recordSuccess marks the delivery SUCCESS, clears its retry fields and, in
// the same atomic write, resets the subscription's consecutive_failures.
func (e *Engine) recordSuccess(h *handling, o outcome) settlement {
	e.intake.succeeded(h.delivery().SubscriptionID)
	now := time.Now()
	var reset bool
	wrote, err := e.write(h, h.b.SubscriptionRaw, func(cur *proto.Delivery, sub *proto.Subscription) (store.Patch, store.Patch, error) {
		reset = false
		if o.superseded(cur) {
			return nil, nil, nil
		}
		dp := append(o.attemptFields(cur, proto.DeliverySuccess),
			store.Field{Name: "completed_at", Value: now},
			store.Field{Name: "error_message", Value: nil},
			store.Field{Name: "next_retry_at", Value: nil},
		)
		dp = append(dp, waitCleared(cur)...)
		if sub == nil || sub.ConsecutiveFailures == 0 {
			return dp, nil, nil
		}
		reset = true
		return dp, store.Patch{
			{Name: "consecutive_failures", Value: 0},
			{Name: "last_triggered_at", Value: now},
			{Name: "last_success_at", Value: now},
		}, nil
	})
	if settled, s := e.afterWrite(h, err); settled {
		return s
	}
	if !wrote {
		return e.settleLoser(h)
	}
	if !reset {
		// Nothing to reset: only timestamps, written coalesced.
		e.successes.record(h.rec.SubscriptionID, now)
	}
	e.report(h, Decision{Kind: Delivered, StatusCode: o.res.StatusCode, Latency: o.res.Latency, Age: now.Sub(attemptedAt(h.delivery(), now))}, time.Time{}, "")
	return ack()
}

// countFailure is the subscription patch of a final failure: one more
// consecutive failure, and DISABLED when the count reaches
// disable_after_failures. A subscription already disabled at its threshold
// is not counted further: sends that were in flight when it was disabled
// must not push consecutive_failures past disable_after_failures.
func countFailure(sub *proto.Subscription, now time.Time) (store.Patch, bool) {
	sp := store.Patch{
		{Name: "last_triggered_at", Value: now},
		{Name: "last_failure_at", Value: now},
	}
	if sub.Status != proto.SubscriptionActive && sub.ConsecutiveFailures >= sub.DisableAfter() {
		return sp, false
	}
	failures := sub.ConsecutiveFailures + 1
	sp = append(store.Patch{{Name: "consecutive_failures", Value: failures}}, sp...)
	if sub.Status == proto.SubscriptionActive && failures >= sub.DisableAfter() {
		return append(sp, store.Field{Name: "status", Value: proto.SubscriptionDisabled}), true
	}
	return sp, false
}

// finalFailure writes a delivery's FAILED state (dp, computed from the
// current record; nil when there is nothing to write) together with the
// failure it adds to its subscription, and reports it: metric, span event,
// log line, and the auto-disable when this failure disabled the
// subscription.
//
// ev, when not nil, is saved in the same atomic write
// (system.webhook_delivery_failed).
func (e *Engine) finalFailure(h *handling, counts bool, reason, msg string, latency time.Duration, ev *store.NewEvent, dp func(cur *proto.Delivery) store.Patch) settlement {
	now := time.Now()
	var disabled *proto.Subscription
	wrote, err := e.writeAndSave(h, h.b.SubscriptionRaw, ev, func(cur *proto.Delivery, sub *proto.Subscription) (store.Patch, store.Patch, error) {
		disabled = nil
		p := dp(cur)
		if p == nil {
			return nil, nil, nil
		}
		p = append(p, waitCleared(cur)...)
		if sub == nil || !counts {
			return p, nil, nil
		}
		sp, off := countFailure(sub, now)
		if off {
			disabled = sub
		}
		return p, sp, nil
	})
	if settled, s := e.afterWrite(h, err); settled {
		return s
	}
	if !wrote {
		return e.settleLoser(h)
	}
	e.report(h, Decision{Kind: Failed, Reason: reason, Latency: latency, AutoDisabled: disabled != nil}, time.Time{}, msg)
	if disabled != nil {
		e.saveDisabledEvent(h.ctx, h.log.logger(), disabled, h.delivery(), h.event(), now)
	}
	return ack()
}

// recordFailure schedules a retry, or fails the delivery once its policy is
// exhausted (or the failure is permanent) and counts it against the
// subscription in the same atomic write, disabling the subscription when the
// count reaches disable_after_failures.
func (e *Engine) recordFailure(h *handling, o outcome) settlement {
	now := time.Now()
	policy := h.sub().Policy()
	h.log.withStatusCode(o.res.StatusCode)
	if o.permanent() || policy.Exhausted(o.attempt) || o.lastChance {
		ev := e.deliveryFailedEvent(h, o.attempt, o.res.StatusCode, o.message())
		return e.finalFailure(h, !o.blocked(), o.reason(), o.message(), o.res.Latency, ev, func(cur *proto.Delivery) store.Patch {
			if o.superseded(cur) {
				return nil
			}
			return append(o.attemptFields(cur, proto.DeliveryFailed),
				store.Field{Name: "completed_at", Value: now},
				store.Field{Name: "error_message", Value: o.message()},
				store.Field{Name: "next_retry_at", Value: nil},
			)
		})
	}

	delay := policy.Delay(o.attempt)
	if c, wait := o.class(); c == transport.Throttle && wait > delay {
		delay = min(wait, e.cfg.MaxRetryAfter)
	}
	next := proto.MillisInstant(now.Add(delay))
	wrote, err := e.write(h, nil, func(cur *proto.Delivery, _ *proto.Subscription) (store.Patch, store.Patch, error) {
		if o.superseded(cur) {
			return nil, nil, nil
		}
		p := append(o.attemptFields(cur, proto.DeliveryRetrying),
			store.Field{Name: "error_message", Value: o.message()},
			store.Field{Name: "next_retry_at", Value: next},
		)
		return append(p, waitCleared(cur)...), nil, nil
	})
	if settled, s := e.afterWrite(h, err); settled {
		return s
	}
	if !wrote {
		// Another copy recorded this attempt: settle as it did.
		return e.settleLoser(h)
	}
	e.report(h, Decision{Kind: Retrying, Reason: o.reason(), Latency: o.res.Latency}, next, o.message(), "retry_in", delay)
	return e.wait(h, next, reasonRetry)
}

// fail marks the delivery FAILED without a send (stale, missing event or
// subscription, inactive subscription, ownership boundary). Like the
// reference it leaves the attempt fields alone; unlike it, it clears
// next_retry_at. It never counts toward auto-disable.
func (e *Engine) fail(h *handling, msg, reason string) settlement {
	now := time.Now()
	wrote, err := e.write(h, nil, func(cur *proto.Delivery, _ *proto.Subscription) (store.Patch, store.Patch, error) {
		if cur.Status.Terminal() {
			return nil, nil, nil
		}
		p := store.Patch{
			{Name: "status", Value: proto.DeliveryFailed},
			{Name: "completed_at", Value: now},
			{Name: "error_message", Value: msg},
			{Name: "next_retry_at", Value: nil},
		}
		return append(p, waitCleared(cur)...), nil, nil
	})
	if settled, s := e.afterWrite(h, err); settled {
		return s
	}
	if !wrote {
		return ack()
	}
	kind := Failed
	if reason == "stale" {
		// The reference counts stale deliveries apart, not as failed.
		kind = Stale
	}
	e.report(h, Decision{Kind: kind, Reason: reason}, time.Time{}, msg, "sent", false)
	return ack()
}

// secretUnavailable keeps a delivery whose secret cannot be decrypted: it
// notes why in error_message (once) and retries later, never unsigned.
func (e *Engine) secretUnavailable(h *handling, cause error) settlement {
	msg := "Signing secret unavailable: " + cause.Error()
	if d := h.delivery(); d.ErrorMessage == nil || *d.ErrorMessage != msg {
		_, err := e.write(h, nil, func(cur *proto.Delivery, _ *proto.Subscription) (store.Patch, store.Patch, error) {
			if cur.Status.Terminal() {
				return nil, nil, nil
			}
			return store.Patch{{Name: "error_message", Value: msg}}, nil, nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return e.infraRetry(h, err)
		}
	}
	delay := e.infraDelay(h.handlings())
	e.report(h, Decision{Kind: PutOff, Reason: "secret_unavailable"}, time.Now().Add(delay),
		"signing secret cannot be decrypted; not sending unsigned: "+cause.Error())
	return nakAfter(delay)
}

// afterWrite turns a failed record write into a settlement. A vanished record
// needs no more work; any other error leaves the item for a retry (the send
// may then be repeated: at-least-once).
func (e *Engine) afterWrite(h *handling, err error) (bool, settlement) {
	switch {
	case err == nil:
		return false, settlement{}
	case errors.Is(err, store.ErrNotFound):
		h.log.Warn("delivery record vanished before its outcome was written", "outcome", "missing_record")
		return true, ack()
	default:
		return true, e.infraRetry(h, err)
	}
}
