package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
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

// handle processes one work item and settles it. It never panics the worker:
// a panic in a transport is recovered and the item released for a retry.
func (e *Engine) handle(ctx context.Context, q queued) {
	m, md := q.m, q.md
	if md == nil {
		q.withdraw()
		_, err := m.Metadata()
		e.log.Error("work item without JetStream metadata", "err", err)
		_ = m.Term()
		return
	}
	handlings := queue.Waits(m) + md.NumDelivered
	if m.Headers().Get(queue.HeldCheckHeader) != "" {
		subID := string(m.Data())
		s := e.checkHeld(ctx, subID, m.Headers(), handlings)
		q.withdraw()
		e.settle(ctx, m, s, handlings, func(at time.Time) *nats.Msg { return e.heldCheckAgain(m, subID, at) })
		return
	}
	id, err := queue.DeliveryID(m)
	if err != nil {
		q.withdraw()
		e.quarantineItem(ctx, m, err)
		return
	}
	h := &handling{msg: m, md: md, id: id, ctx: extractTrace(ctx, m), log: newHandlingLog(e.log, id), line: q.line, item: q, started: time.Now()}
	s := settleInLine(h, e.safeProcess(h))
	e.busy.done(q.parked)
	if s.kind == settleParked {
		return
	}
	q.withdraw()
	e.settle(ctx, m, s, handlings, func(at time.Time) *nats.Msg {
		msg := queue.NewScheduleMsg(e.cfg.Queue, id, at)
		queue.SetRoute(msg, queue.RouteOf(m))
		return msg
	})
}

func (e *Engine) safeProcess(h *handling) (s settlement) {
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("delivery processing panicked; will retry", "delivery_id", h.id, "panic", fmt.Sprint(r))
			s = nakAfter(e.infraDelay(h.handlings()))
		}
	}()
	return e.process(h)
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
func (e *Engine) process(h *handling) settlement {
	ctx := h.ctx
	// The bridge names the delivery's event and subscription in the work
	// item's headers: everything below is then read in one round trip.
	route := queue.RouteOf(h.msg)
	rec, pre, err := e.store.DeliveryAndLoad(ctx, h.id, route.EventID, route.SubscriptionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Expired or deleted: nothing left to deliver, and nothing to record.
		h.log.Warn("delivery record not found; dropping work item", "outcome", "missing_record")
		return ack()
	case errors.Is(err, store.ErrCorrupt):
		var ce *store.CorruptError
		var raw []byte
		if errors.As(err, &ce) {
			raw = ce.Raw
		}
		if qerr := e.store.Quarantine(ctx, h.id, "corrupt_record", raw); qerr != nil {
			return e.infraRetry(h, qerr)
		}
		h.log.Error("delivery record unreadable; quarantined in dispatch:failed", "outcome", "corrupt_record", "err", err)
		return ack()
	case err != nil:
		return e.infraRetry(h, err)
	}
	h.rec = rec
	d := rec.Delivery
	h.log.withRoute(d.SubscriptionID, d.EventID)
	h.lab = Labels{EventType: d.EventType}
	if d.Status.Terminal() {
		h.log.Debug("delivery already final; skipping duplicate work item", "status", d.Status)
		return ack()
	}
	var span trace.Span
	h.ctx, span = e.startAttempt(ctx, h.md, d)
	defer span.End()

	h.now = time.Now()
	if age := h.now.Sub(attemptedAt(d, h.now)); age > e.cfg.MaxDeliveryAge {
		return e.fail(h, proto.ExpiredMessage(age, e.cfg.MaxDeliveryAge), "stale")
	}
	if d.NextRetryAt != nil && d.NextRetryAt.Sub(h.now) > 100*time.Millisecond && h.msg.Headers().Get(queue.ReleasedHeader) == "" {
		if d.Waiting != nil && *d.Waiting == reasonBreakerOpen {
			// Held for the breaker, or about to be: a second copy, or this
			// item back after its hold failed half-way. A wake-up now would
			// put the delivery in two places (breakerhold.go).
			if s, ok := e.alreadyHeld(h); ok {
				return s
			}
		}
		// An early copy (a duplicate, a legacy retry entry, a wake-up
		// replaced by a later one): wait for the time the record names
		// instead of sending ahead of the backoff or the put-off. A
		// delivery the held-check released from a breaker's hold is the
		// only copy, and its record names the latest release time.
		return e.wait(h, d.NextRetryAt.Time, reasonEarly)
	}

	if pre != nil {
		h.b, err = pre.Bundle()
	} else {
		h.b, err = e.store.Load(ctx, d)
	}
	if err != nil {
		return e.infraRetry(h, err)
	}
	b := h.b
	// An unreadable event or subscription record is left for recovery, as
	// upstream since 0.1.25.18 (not turned into "not found"): an operator
	// can repair it, and the stale cutoff ends the wait.
	if errors.Is(b.EventErr, store.ErrCorrupt) || errors.Is(b.SubscriptionErr, store.ErrCorrupt) || b.SettingsErr != nil {
		return e.infraRetry(h, errors.Join(b.EventErr, b.SubscriptionErr, b.SettingsErr))
	}
	// The reference's messages are kept as they are (dashboards and admin
	// users match on them).
	if b.EventErr != nil {
		return e.fail(h, "Event not found: "+d.EventID, "event_not_found")
	}
	if b.Event.EventType != "" {
		h.lab.EventType = b.Event.EventType
	}
	if b.SubscriptionErr != nil {
		return e.fail(h, "Subscription not found", "subscription_not_found")
	}
	sub := b.Subscription
	h.lab.TenantID = sub.TenantID
	if sub.Status != proto.SubscriptionActive {
		status := string(sub.Status)
		if status == "" {
			status = "null"
		}
		if e.cfg.InactivePolicy == InactiveDefer {
			// A paused or disabled subscription is a breaker held open by an
			// operator: its deliveries are held in JetStream and go out
			// once it is ACTIVE again (or fail at the stale cutoff).
			return e.hold(h, "subscription_"+strings.ToLower(status))
		}
		return e.fail(h, "Subscription not active: "+status, "subscription_inactive")
	}

	if proto.CrossesOwnershipBoundary(sub.TenantID, b.Event.EventType, b.Event.Category) {
		h.lab.Category = b.Event.Category
		return e.fail(h, fmt.Sprintf("Ownership boundary (#209): %s/%s events are admin-only and not delivered to a tenant-owned subscription",
			b.Event.EventType, b.Event.Category), "boundary_skipped")
	}

	e.freshEvidence(d, sub)
	e.releasedEvidence(h)
	woke := e.busy.arrived(h.item.parked)
	if s, ok := e.waitBehind(h, woke); ok {
		return s
	}
	adm, wait, ok := e.admitHandling(h)
	if !ok && wait.reason == reasonBreakerOpen && d.Attempts == 0 && h.line == nil {
		// An ordered line's item waits in its line instead (waitInLine):
		// held apart, it would lose its place.
		return e.holdForBreaker(h)
	}
	if !ok && wait.reason == reasonBusy && e.parkBusy(h, woke) {
		return parkedInLine()
	}
	if !ok {
		return e.wait(h, wait.until, wait.reason)
	}
	defer adm.close()
	if woke {
		// Its limit may have grown: let the next in line look for a slot.
		e.busy.freed(d.SubscriptionID)
	}

	secret := ""
	if b.HasSecret {
		secret, err = proto.DecryptSecret(e.cfg.SecretKey, b.Secret)
		if err != nil {
			// Fail closed: never send unsigned when a secret exists. The
			// key may be fixed by an operator, so this is retried like an
			// infrastructure error until the stale cutoff.
			return e.secretUnavailable(h, err)
		}
	} else if sub.CreatedAt != nil && h.now.Sub(sub.CreatedAt.Time) < secretGrace {
		// Admin stores a new subscription and then, separately, its secret:
		// a delivery in between must wait for the secret, not go unsigned.
		h.log.Debug("new subscription has no secret yet; waiting for it")
		return nakAfter(time.Second)
	}
	if !proto.SecretUsable(secret) && !e.cfg.AllowUnsigned {
		// Never unsigned (upstream 0.1.25.24): a receiver that verifies
		// would reject the request, one that does not would trust a forgery.
		return e.fail(h, msgMissingSecret, "missing_signing_secret")
	}
	return e.attempt(h, secret, adm)
}

// attempt sends the delivery once and records the outcome.
func (e *Engine) attempt(h *handling, secret string, adm *admission) settlement {
	ctx, b, lab := h.ctx, h.b, h.lab
	d, ev, sub := h.delivery(), b.Event, b.Subscription
	attempt := d.Attempts + 1
	h.log.withAttempt(attempt)
	if attempt == 1 {
		// Once per delivery, at its first send: the reference validates on
		// every handling, which jetrelay repeats for put-offs too.
		e.checkPayload(&h.log, ev)
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
		Headers:        e.customHeaders(&h.log, lab, sub.Headers),
		DeliveryID:     d.DeliveryID,
		SubscriptionID: d.SubscriptionID,
		Attempt:        attempt,
	}
	if proto.SecretUsable(secret) {
		req.Signature = proto.Sign(secret, b.EventRaw)
	}
	e.standardWebhooks(h, req, secret)
	h.log.withTrace(traceID)
	h.logTraced = true

	var res transport.Result
	queued, prepared := h.waits(time.Now())
	e.obs.Sending(lab)
	t, err := e.transport.Lookup(sub.URL)
	if err == nil {
		sendCtx, cancel := context.WithTimeout(sendCtx, e.cfg.AttemptTimeout)
		res, err = e.send(sendCtx, t, req)
		cancel()
	} else {
		// Metrics name no transport for an unregistered scheme.
		scheme = ""
	}
	o := outcome{attempt: attempt, res: res, err: err, traceID: ev.TraceID, lastChance: adm.lastChance}
	endSend(send, o)
	e.obs.Sent(lab, Send{Transport: scheme, Outcome: o.sendOutcome(), StatusCode: res.StatusCode, Latency: res.Latency, Queued: queued, Prepared: prepared})
	if ctx.Err() != nil && err != nil {
		// Shutdown cut the send short: this was not a real attempt.
		return nakAfter(0)
	}
	adm.sent(o)
	if o.blocked() {
		// Refused before any connection: like upstream (0.1.25.22, which
		// checks before sending) no attempt is recorded and response_status
		// stays null; ssrf_blocked is terminal and not counted.
		return e.fail(h, o.message(), o.reason())
	}
	if o.accepted() {
		return e.recordSuccess(h, o)
	}
	return e.recordFailure(h, o)
}

// send is one transport's Deliver, its time counted among the worker
// pool's sends (workers.resize) while it runs, a panicking plugin's too.
func (e *Engine) send(ctx context.Context, t transport.Transport, req *transport.Request) (transport.Result, error) {
	start := e.workers.sendTime.begin(sinceEpoch())
	defer func() { e.workers.sendTime.end(start, sinceEpoch()) }()
	return t.Deliver(ctx, req)
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
func (e *Engine) infraRetry(h *handling, err error) settlement {
	d := e.infraDelay(h.handlings())
	e.report(h, Decision{Kind: PutOff, Reason: "infra_error"}, time.Now().Add(d), err.Error())
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
