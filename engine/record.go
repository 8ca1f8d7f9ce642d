package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// outcome is what one send produced.
type outcome struct {
	attempt int
	res     transport.Result
	err     error
	traceID string // the event's trace_id, copied into a delivery that has none
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
	case o.err != nil:
		return "transport_error"
	case c >= 400 && c < 500:
		return "http_4xx"
	case c >= 500 && c < 600:
		return "http_5xx"
	}
	return "transport_error"
}

func (o outcome) permanent() bool { return errors.Is(o.err, transport.ErrPermanent) }

// attemptFields are the fields every attempt writes, in the order the
// reference service's Delivery model has them.
func (o outcome) attemptFields(d *proto.Delivery, status proto.DeliveryStatus, now time.Time) store.Patch {
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

// recordSuccess marks the delivery SUCCESS and clears retry fields.
func (e *Engine) recordSuccess(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, d *proto.Delivery, sub *proto.Subscription, o outcome) settlement {
	now := time.Now()
	_, err := e.store.UpdateDelivery(ctx, d.DeliveryID, func(cur *proto.Delivery) (store.Patch, error) {
		if cur.Status.Terminal() {
			return nil, nil
		}
		p := o.attemptFields(cur, proto.DeliverySuccess, now)
		return append(p,
			store.Field{Name: "completed_at", Value: now},
			store.Field{Name: "error_message", Value: nil},
			store.Field{Name: "next_retry_at", Value: nil},
		), nil
	})
	if settled, s := e.afterWrite(log, md, err); settled {
		return s
	}
	e.successes.record(ctx, sub, now)
	log.Debug("delivered", "outcome", "success", "status_code", o.res.StatusCode, "latency_ms", o.res.Latency.Milliseconds())
	return ack()
}

// recordFailure schedules a retry, or fails the delivery once its policy is
// exhausted (or the failure is permanent) and counts it against the
// subscription.
func (e *Engine) recordFailure(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, d *proto.Delivery, sub *proto.Subscription, ev *proto.Event, o outcome) settlement {
	now := time.Now()
	policy := sub.Policy()
	log = log.With("reason", o.reason(), "status_code", o.res.StatusCode)
	if o.permanent() || policy.Exhausted(o.attempt) {
		_, err := e.store.UpdateDelivery(ctx, d.DeliveryID, func(cur *proto.Delivery) (store.Patch, error) {
			if cur.Status.Terminal() {
				return nil, nil
			}
			p := o.attemptFields(cur, proto.DeliveryFailed, now)
			return append(p,
				store.Field{Name: "completed_at", Value: now},
				store.Field{Name: "error_message", Value: o.message()},
				store.Field{Name: "next_retry_at", Value: nil},
			), nil
		})
		if settled, s := e.afterWrite(log, md, err); settled {
			return s
		}
		log.Warn("delivery failed", "outcome", "failed", "err", o.message())
		e.countFailure(ctx, log, sub, d, ev, now)
		return ack()
	}

	delay := policy.Delay(o.attempt)
	if o.res.Outcome == transport.Throttled && o.res.RetryAfter > delay {
		delay = min(o.res.RetryAfter, e.cfg.MaxRetryAfter)
	}
	next := proto.MillisInstant(now.Add(delay))
	_, err := e.store.UpdateDelivery(ctx, d.DeliveryID, func(cur *proto.Delivery) (store.Patch, error) {
		if cur.Status.Terminal() {
			return nil, nil
		}
		p := o.attemptFields(cur, proto.DeliveryRetrying, now)
		return append(p,
			store.Field{Name: "error_message", Value: o.message()},
			store.Field{Name: "next_retry_at", Value: next},
		), nil
	})
	if settled, s := e.afterWrite(log, md, err); settled {
		return s
	}
	log.Info("delivery attempt failed; retry scheduled", "outcome", "retrying", "err", o.message(), "retry_in", delay)
	return nakAfter(time.Until(next))
}

// fail marks the delivery FAILED without a send (stale, missing event or
// subscription, inactive subscription). Like the reference it leaves the
// attempt fields alone; unlike it, it clears next_retry_at.
func (e *Engine) fail(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, id, msg, reason string) settlement {
	now := time.Now()
	_, err := e.store.UpdateDelivery(ctx, id, func(cur *proto.Delivery) (store.Patch, error) {
		if cur.Status.Terminal() {
			return nil, nil
		}
		return store.Patch{
			{Name: "status", Value: proto.DeliveryFailed},
			{Name: "completed_at", Value: now},
			{Name: "error_message", Value: msg},
			{Name: "next_retry_at", Value: nil},
		}, nil
	})
	if settled, s := e.afterWrite(log, md, err); settled {
		return s
	}
	log.Warn("delivery failed without a send", "outcome", "failed", "reason", reason, "err", msg)
	return ack()
}

// secretUnavailable keeps a delivery whose secret cannot be decrypted: it
// notes why in error_message (once) and retries later, never unsigned.
func (e *Engine) secretUnavailable(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, id string, d *proto.Delivery, cause error) settlement {
	msg := "Signing secret unavailable: " + cause.Error()
	if d.ErrorMessage == nil || *d.ErrorMessage != msg {
		_, err := e.store.UpdateDelivery(ctx, id, func(cur *proto.Delivery) (store.Patch, error) {
			if cur.Status.Terminal() {
				return nil, nil
			}
			return store.Patch{{Name: "error_message", Value: msg}}, nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return e.infraRetry(log, md, err)
		}
	}
	delay := e.infraDelay(md.NumDelivered)
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
