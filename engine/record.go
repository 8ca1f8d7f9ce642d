package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"

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
	labels  Labels // for the Observer
}

// message is the delivery's error_message for a failed send: "HTTP <code>"
// for an answer, the transport's error otherwise.
func (o outcome) message() string {
	if o.err != nil {
		return o.err.Error()
	}
	return o.res.Message
}

// reason is the reference service's metric reason for a failed send.
func (o outcome) reason() string {
	switch c := o.res.StatusCode; {
	case o.blocked():
		return "ssrf_blocked"
	case o.err != nil:
		return "transport_error"
	case c >= 400 && c < 500:
		return "http_4xx"
	case c >= 500 && c < 600:
		return "http_5xx"
	}
	return "transport_error"
}

// sendOutcome classifies the send for Observer.Sent.
func (o outcome) sendOutcome() string {
	switch {
	case o.blocked():
		return "blocked"
	case o.err != nil:
		return "error"
	case o.res.Outcome == transport.Delivered:
		return "delivered"
	case o.res.Outcome == transport.Throttled:
		return "throttled"
	}
	return "failed"
}

func (o outcome) permanent() bool { return errors.Is(o.err, transport.ErrPermanent) }

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
	switch {
	case o.err != nil && o.permanent():
		return errNotAttempted
	case o.err != nil:
		return errFailedAttempt
	case o.res.Outcome == transport.Delivered:
		return nil
	case o.res.Outcome == transport.Throttled:
		return errFailedAttempt
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
func (e *Engine) write(ctx context.Context, rec *store.DeliveryRecord, subRaw []byte, fn store.OutcomeFunc) (bool, error) {
	return e.writeAndSave(ctx, rec, subRaw, nil, fn)
}

// recordSuccess marks the delivery SUCCESS, clears its retry fields and, in
// the same atomic write, resets the subscription's consecutive_failures.
func (e *Engine) recordSuccess(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, rec *store.DeliveryRecord, subRaw []byte, o outcome) settlement {
	now := time.Now()
	var reset bool
	wrote, err := e.write(ctx, rec, subRaw, func(cur *proto.Delivery, sub *proto.Subscription) (store.Patch, store.Patch, error) {
		reset = false
		if o.superseded(cur) {
			return nil, nil, nil
		}
		dp := append(o.attemptFields(cur, proto.DeliverySuccess),
			store.Field{Name: "completed_at", Value: now},
			store.Field{Name: "error_message", Value: nil},
			store.Field{Name: "next_retry_at", Value: nil},
		)
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
	if settled, s := e.afterWrite(log, md, err); settled {
		return s
	}
	if !wrote {
		log.Debug("outcome already recorded by another copy of this work item", "outcome", "duplicate")
		return ack()
	}
	if !reset {
		// Nothing to reset: only timestamps, written coalesced.
		e.successes.record(rec.SubscriptionID, now)
	}
	e.obs.Succeeded(o.labels, o.res.StatusCode, o.res.Latency, now.Sub(attemptedAt(rec.Delivery, now)))
	spanEvent(ctx, eventDelivered, "delivered", attribute.Int("http.response.status_code", o.res.StatusCode))
	log.Info("delivered", "outcome", "success", "status_code", o.res.StatusCode, "latency_ms", o.res.Latency.Milliseconds())
	return ack()
}

// recordFailure schedules a retry, or fails the delivery once its policy is
// exhausted (or the failure is permanent) and counts it against the
// subscription in the same atomic write, disabling the subscription when the
// count reaches disable_after_failures.
func (e *Engine) recordFailure(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, rec *store.DeliveryRecord, subRaw []byte, sub *proto.Subscription, ev *proto.Event, o outcome) settlement {
	now := time.Now()
	policy := sub.Policy()
	log = log.With("reason", o.reason(), "status_code", o.res.StatusCode)
	if o.permanent() || policy.Exhausted(o.attempt) {
		var disabled *proto.Subscription
		failedEvent := e.deliveryFailedEvent(rec.Delivery, sub, ev, o, now)
		wrote, err := e.writeAndSave(ctx, rec, subRaw, failedEvent, func(cur *proto.Delivery, sub *proto.Subscription) (store.Patch, store.Patch, error) {
			disabled = nil
			if o.superseded(cur) {
				return nil, nil, nil
			}
			dp := append(o.attemptFields(cur, proto.DeliveryFailed),
				store.Field{Name: "completed_at", Value: now},
				store.Field{Name: "error_message", Value: o.message()},
				store.Field{Name: "next_retry_at", Value: nil},
			)
			if sub == nil {
				return dp, nil, nil
			}
			failures := sub.ConsecutiveFailures + 1
			sp := store.Patch{
				{Name: "consecutive_failures", Value: failures},
				{Name: "last_triggered_at", Value: now},
				{Name: "last_failure_at", Value: now},
			}
			if sub.Status == proto.SubscriptionActive && failures >= sub.DisableAfter() {
				sp = append(sp, store.Field{Name: "status", Value: proto.SubscriptionDisabled})
				disabled = sub
			}
			return dp, sp, nil
		})
		if settled, s := e.afterWrite(log, md, err); settled {
			return s
		}
		if !wrote {
			return ack()
		}
		e.obs.Failed(o.labels, o.reason(), o.res.Latency)
		log.Warn("delivery failed", "outcome", "failed", "err", o.message())
		spanEvent(ctx, eventFailed, o.reason(), attribute.Bool("jetrelay.permanent", o.permanent()))
		if disabled != nil {
			e.obs.AutoDisabled(disabled.TenantID)
			e.saveDisabledEvent(ctx, log, disabled, rec.Delivery, ev, now)
		}
		return ack()
	}

	delay := policy.Delay(o.attempt)
	if o.res.Outcome == transport.Throttled && o.res.RetryAfter > delay {
		delay = min(o.res.RetryAfter, e.cfg.MaxRetryAfter)
	}
	next := proto.MillisInstant(now.Add(delay))
	wrote, err := e.write(ctx, rec, nil, func(cur *proto.Delivery, _ *proto.Subscription) (store.Patch, store.Patch, error) {
		if o.superseded(cur) {
			return nil, nil, nil
		}
		return append(o.attemptFields(cur, proto.DeliveryRetrying),
			store.Field{Name: "error_message", Value: o.message()},
			store.Field{Name: "next_retry_at", Value: next},
		), nil, nil
	})
	if settled, s := e.afterWrite(log, md, err); settled {
		return s
	}
	if !wrote {
		// Another copy recorded this attempt and owns the retry chain.
		return ack()
	}
	e.obs.Failed(o.labels, o.reason(), o.res.Latency)
	e.obs.Retried(o.labels)
	spanEvent(ctx, eventRetryScheduled, o.reason(), untilAttr(next))
	log.Info("delivery attempt failed; retry scheduled", "outcome", "retrying", "err", o.message(), "retry_in", delay)
	return e.putOff(ctx, log, md, rec, next, reasonRetry)
}

// fail marks the delivery FAILED without a send (stale, missing event or
// subscription, inactive subscription, ownership boundary). Like the
// reference it leaves the attempt fields alone; unlike it, it clears
// next_retry_at. It never counts toward auto-disable.
func (e *Engine) fail(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, rec *store.DeliveryRecord, lab Labels, msg, reason string) settlement {
	now := time.Now()
	wrote, err := e.write(ctx, rec, nil, func(cur *proto.Delivery, _ *proto.Subscription) (store.Patch, store.Patch, error) {
		if cur.Status.Terminal() {
			return nil, nil, nil
		}
		return store.Patch{
			{Name: "status", Value: proto.DeliveryFailed},
			{Name: "completed_at", Value: now},
			{Name: "error_message", Value: msg},
			{Name: "next_retry_at", Value: nil},
		}, nil, nil
	})
	if settled, s := e.afterWrite(log, md, err); settled {
		return s
	}
	if !wrote {
		return ack()
	}
	if reason == "stale" {
		// The reference counts stale deliveries apart, not as failed.
		e.obs.Stale(lab)
	} else {
		e.obs.Failed(lab, reason, 0)
	}
	if t := rec.Delivery.TraceID; t != "" {
		log = log.With("trace_id", t)
	}
	spanEvent(ctx, eventFailed, reason)
	log.Warn("delivery failed without a send", "outcome", "failed", "reason", reason, "err", msg)
	return ack()
}

// secretUnavailable keeps a delivery whose secret cannot be decrypted: it
// notes why in error_message (once) and retries later, never unsigned.
func (e *Engine) secretUnavailable(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, rec *store.DeliveryRecord, cause error) settlement {
	msg := "Signing secret unavailable: " + cause.Error()
	if d := rec.Delivery; d.ErrorMessage == nil || *d.ErrorMessage != msg {
		_, err := e.write(ctx, rec, nil, func(cur *proto.Delivery, _ *proto.Subscription) (store.Patch, store.Patch, error) {
			if cur.Status.Terminal() {
				return nil, nil, nil
			}
			return store.Patch{{Name: "error_message", Value: msg}}, nil, nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return e.infraRetry(log, md, err)
		}
	}
	delay := e.infraDelay(md.NumDelivered)
	e.obs.Postponed("secret_unavailable")
	log.Error("signing secret cannot be decrypted; not sending unsigned, will retry", "outcome", "secret_unavailable", "err", cause, "retry_in", delay)
	return nakAfter(delay)
}

// afterWrite turns a failed record write into a settlement. A vanished record
// needs no more work; any other error leaves the item for a retry (the send
// may then be repeated: at-least-once).
func (e *Engine) afterWrite(log *slog.Logger, md *jetstream.MsgMetadata, err error) (bool, settlement) {
	switch {
	case err == nil:
		return false, settlement{}
	case errors.Is(err, store.ErrNotFound):
		log.Warn("delivery record vanished before its outcome was written", "outcome", "missing_record")
		return true, ack()
	default:
		return true, e.infraRetry(log, md, err)
	}
}
