package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// secretGrace is how long after its creation a subscription without a stored
// secret is assumed to be waiting for it rather than to have none.
const secretGrace = 30 * time.Second

// msgMissingSecret is upstream 0.1.25.24's error_message for a delivery
// refused for want of a signing secret.
const msgMissingSecret = "Webhook signing secret is missing; refusing unsigned delivery"

// settlement is what happens to a work item once its outcome is recorded.
type settlement struct {
	kind  settleKind
	delay time.Duration // for nak
}

type settleKind int

const (
	settleAck  settleKind = iota // final state recorded (or nothing left to do)
	settleNak                    // redeliver after delay
	settleTerm                   // the work item itself is unusable
)

func ack() settlement                     { return settlement{kind: settleAck} }
func nakAfter(d time.Duration) settlement { return settlement{kind: settleNak, delay: d} }

// handle processes one work item and settles it. It never panics the worker:
// a panic in a transport is recovered and the item released for a retry.
func (e *Engine) handle(ctx context.Context, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		e.log.Error("work item without JetStream metadata", "err", err)
		_ = m.Term()
		return
	}
	id, err := queue.DeliveryID(m)
	if err != nil {
		e.quarantineItem(ctx, m, err)
		return
	}
	stop := e.alive.track(m)
	s := e.safeProcess(extractTrace(ctx, m), id, md)
	stop()
	switch s.kind {
	case settleAck:
		_ = m.Ack()
	case settleNak:
		_ = m.NakWithDelay(s.delay)
	case settleTerm:
		_ = m.Term()
	}
}

func (e *Engine) safeProcess(ctx context.Context, id string, md *jetstream.MsgMetadata) (s settlement) {
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("delivery processing panicked; will retry", "delivery_id", id, "panic", fmt.Sprint(r))
			s = nakAfter(e.infraDelay(md.NumDelivered))
		}
	}()
	return e.process(ctx, id, md)
}

// quarantineItem parks an unusable work item in dispatch:failed and removes
// it from the stream. If Redis cannot take it, the item is kept for later.
func (e *Engine) quarantineItem(ctx context.Context, m jetstream.Msg, cause error) {
	if err := e.store.Quarantine(ctx, "", "malformed_work_item", m.Data()); err != nil {
		e.log.Warn("cannot quarantine malformed work item; will retry", "err", err)
		_ = m.NakWithDelay(e.cfg.InfraRetryMax)
		return
	}
	e.log.Error("malformed work item quarantined in dispatch:failed", "err", cause)
	_ = m.Term()
}

// process runs the decision matrix of the reference service (contract
// §6.2–6.7) with jetrelay's fixes, and returns how to settle the item.
func (e *Engine) process(ctx context.Context, id string, md *jetstream.MsgMetadata) settlement {
	log := e.log.With("delivery_id", id)
	rec, err := e.store.Delivery(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Expired or deleted: nothing left to deliver, and nothing to record.
		log.Warn("delivery record not found; dropping work item", "outcome", "missing_record")
		return ack()
	case errors.Is(err, store.ErrCorrupt):
		var ce *store.CorruptError
		var raw []byte
		if errors.As(err, &ce) {
			raw = ce.Raw
		}
		if qerr := e.store.Quarantine(ctx, id, "corrupt_record", raw); qerr != nil {
			return e.infraRetry(log, md, qerr)
		}
		log.Error("delivery record unreadable; quarantined in dispatch:failed", "outcome", "corrupt_record", "err", err)
		return ack()
	case err != nil:
		return e.infraRetry(log, md, err)
	}
	d := rec.Delivery
	log = log.With("subscription_id", d.SubscriptionID, "event_id", d.EventID)
	lab := Labels{EventType: d.EventType}
	if d.Status.Terminal() {
		log.Debug("delivery already final; skipping duplicate work item", "status", d.Status)
		return ack()
	}
	ctx, span := e.startAttempt(ctx, md, d)
	defer span.End()

	now := time.Now()
	if age := now.Sub(attemptedAt(d, now)); age > e.cfg.MaxDeliveryAge {
		msg := fmt.Sprintf("Delivery expired: %dh old (max %dh)", age/time.Hour, e.cfg.MaxDeliveryAge/time.Hour)
		return e.fail(ctx, log, md, rec, lab, msg, "stale")
	}
	if d.Status == proto.DeliveryRetrying && d.NextRetryAt != nil {
		// An early copy (a lost nak, a duplicate, a legacy retry entry):
		// wait for the scheduled time instead of sending ahead of the
		// backoff (putOff stops at the stale cutoff, and parks long waits).
		if d.NextRetryAt.Sub(now) > 100*time.Millisecond {
			spanEvent(ctx, eventDeferred, reasonRetry, untilAttr(d.NextRetryAt.Time))
			return e.putOff(ctx, log, md, rec, d.NextRetryAt.Time, reasonRetry)
		}
	}

	adm, wait, ok := e.admit(ctx, d.SubscriptionID, now)
	if !ok {
		return e.putOff(ctx, log, md, rec, wait.until, wait.reason)
	}
	defer adm.close()

	b, err := e.store.Load(ctx, d)
	if err != nil {
		return e.infraRetry(log, md, err)
	}
	// An unreadable event or subscription record is left for recovery, as
	// upstream since 0.1.25.18 (not turned into "not found"): an operator
	// can repair it, and the stale cutoff ends the wait.
	if errors.Is(b.EventErr, store.ErrCorrupt) || errors.Is(b.SubscriptionErr, store.ErrCorrupt) {
		return e.infraRetry(log, md, errors.Join(b.EventErr, b.SubscriptionErr))
	}
	// The reference's messages are kept as they are (dashboards and admin
	// users match on them).
	if b.EventErr != nil {
		return e.fail(ctx, log, md, rec, lab, "Event not found: "+d.EventID, "event_not_found")
	}
	if b.Event.EventType != "" {
		lab.EventType = b.Event.EventType
	}
	if b.SubscriptionErr != nil {
		return e.fail(ctx, log, md, rec, lab, "Subscription not found", "subscription_not_found")
	}
	sub := b.Subscription
	lab.TenantID = sub.TenantID
	if sub.Status != proto.SubscriptionActive {
		status := string(sub.Status)
		if status == "" {
			status = "null"
		}
		if e.cfg.InactivePolicy == InactiveDefer {
			// A paused or disabled subscription is a breaker held open by an
			// operator: its deliveries wait (until the stale cutoff) and go
			// out once it is ACTIVE again, no restart needed.
			return e.putOff(ctx, log, md, rec, spread(now.Add(e.cfg.InactiveRecheck), e.cfg.InactiveRecheck), "subscription_"+strings.ToLower(status))
		}
		return e.fail(ctx, log, md, rec, lab, "Subscription not active: "+status, "subscription_inactive")
	}

	if proto.CrossesOwnershipBoundary(sub.TenantID, b.Event.EventType, b.Event.Category) {
		lab.Category = b.Event.Category
		return e.fail(ctx, log, md, rec, lab, fmt.Sprintf("Ownership boundary (#209): %s/%s events are admin-only and not delivered to a tenant-owned subscription",
			b.Event.EventType, b.Event.Category), "boundary_skipped")
	}

	secret := ""
	if b.HasSecret {
		secret, err = proto.DecryptSecret(e.cfg.SecretKey, b.Secret)
		if err != nil {
			// Fail closed: never send unsigned when a secret exists. The
			// key may be fixed by an operator, so this is retried like an
			// infrastructure error until the stale cutoff.
			return e.secretUnavailable(ctx, log, md, rec, err)
		}
	} else if sub.CreatedAt != nil && now.Sub(sub.CreatedAt.Time) < secretGrace {
		// Admin stores a new subscription and then, separately, its secret:
		// a delivery in between must wait for the secret, not go unsigned.
		log.Debug("new subscription has no secret yet; waiting for it")
		return nakAfter(time.Second)
	}
	if !proto.SecretUsable(secret) && !e.cfg.AllowUnsigned {
		// Never unsigned (upstream 0.1.25.24): a receiver that verifies
		// would reject the request, one that does not would trust a forgery.
		return e.fail(ctx, log, md, rec, lab, msgMissingSecret, "missing_signing_secret")
	}
	return e.attempt(ctx, log, md, rec, b, secret, adm, lab)
}

// attempt sends the delivery once and records the outcome.
func (e *Engine) attempt(ctx context.Context, log *slog.Logger, md *jetstream.MsgMetadata, rec *store.DeliveryRecord, b *store.Bundle, secret string, adm *admission, lab Labels) settlement {
	d, ev, sub := rec.Delivery, b.Event, b.Subscription
	attempt := d.Attempts + 1
	log = log.With("attempt", attempt)
	if attempt == 1 {
		// Once per delivery, at its first send: the reference validates on
		// every handling, which jetrelay repeats for put-offs too.
		e.checkPayload(log, ev)
	}
	scheme, _, _ := strings.Cut(sub.URL, ":")
	scheme = strings.ToLower(scheme)
	sendCtx, send := e.startSend(ctx, scheme, sub.URL)
	traceID, traceparent := outboundTrace(ev.TraceID, d, trace.SpanContextFromContext(ctx), send.SpanContext())
	req := &transport.Request{
		URL:            sub.URL,
		Body:           b.EventRaw,
		EventID:        ev.EventID,
		EventType:      ev.EventType,
		TraceID:        traceID,
		Traceparent:    traceparent,
		RequestID:      ev.RequestID,
		Headers:        e.customHeaders(log, lab, sub.Headers),
		DeliveryID:     d.DeliveryID,
		SubscriptionID: d.SubscriptionID,
		Attempt:        attempt,
	}
	if proto.SecretUsable(secret) {
		req.Signature = proto.Sign(secret, b.EventRaw)
	}
	log = log.With("trace_id", traceID)

	var res transport.Result
	e.obs.Attempted(lab)
	t, err := e.transport.Lookup(sub.URL)
	if err == nil {
		sendCtx, cancel := context.WithTimeout(sendCtx, e.cfg.AttemptTimeout)
		res, err = t.Deliver(sendCtx, req)
		cancel()
	} else {
		// Metrics name no transport for an unregistered scheme.
		scheme = ""
	}
	o := outcome{attempt: attempt, res: res, err: err, traceID: ev.TraceID, labels: lab}
	endSend(send, o)
	e.obs.Sent(lab, Send{Transport: scheme, Outcome: o.sendOutcome(), StatusCode: res.StatusCode, Latency: res.Latency})
	if ctx.Err() != nil && err != nil {
		// Shutdown cut the send short: this was not a real attempt.
		return nakAfter(0)
	}
	adm.sent(o)
	if o.blocked() {
		// Refused before any connection: like upstream (0.1.25.22, which
		// checks before sending) no attempt is recorded and response_status
		// stays null; ssrf_blocked is terminal and not counted.
		return e.fail(ctx, log, md, rec, lab, o.message(), o.reason())
	}
	if err == nil && res.Outcome == transport.Delivered {
		return e.recordSuccess(ctx, log, md, rec, b.SubscriptionRaw, o)
	}
	return e.recordFailure(ctx, log, md, rec, b.SubscriptionRaw, sub, b.Event, o)
}

func attemptedAt(d *proto.Delivery, now time.Time) time.Time {
	if d.AttemptedAt == nil {
		return now
	}
	return d.AttemptedAt.Time
}

// infraRetry releases the item for a later retry after an infrastructure
// error (Redis unreachable, a write that could not be made). It never
// consumes an attempt and never fails the delivery.
func (e *Engine) infraRetry(log *slog.Logger, md *jetstream.MsgMetadata, err error) settlement {
	d := e.infraDelay(md.NumDelivered)
	e.obs.Postponed("infra_error")
	log.Warn("infrastructure error; delivery will be retried", "err", err, "retry_in", d)
	return nakAfter(d)
}

// infraDelay grows with the number of deliveries of the item, capped, with
// ±20 % jitter so that replicas do not retry in lockstep.
func (e *Engine) infraDelay(numDelivered uint64) time.Duration {
	d := e.cfg.InfraRetryMin
	for i := uint64(1); i < numDelivered && d < e.cfg.InfraRetryMax; i++ {
		d *= 2
	}
	d = min(d, e.cfg.InfraRetryMax)
	jitter := time.Duration(rand.Int64N(int64(d)/5+1)) * 2
	return d - d/5 + jitter
}
