package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Inspection is everything known about one delivery: its record, event and
// subscription (never the secret, URL credentials hidden), its attempts,
// where it is now and what happens next.
type Inspection struct {
	Delivery json.RawMessage `json:"delivery"`
	// Event is the event:{id} record, or null when it is gone.
	Event        json.RawMessage    `json:"event,omitempty"`
	EventErr     string             `json:"event_error,omitempty"`
	Subscription *SubscriptionBrief `json:"subscription,omitempty"`
	// Ordering is how its subscription's deliveries are ordered.
	Ordering *OrderingBrief `json:"ordering,omitempty"`
	// SubscriptionErr says why Subscription is missing.
	SubscriptionErr string `json:"subscription_error,omitempty"`
	Attempts        int    `json:"attempts"`
	// LastAnswer is the last attempt's outcome in words ("HTTP 503 in
	// 87 ms", "Connection refused"), empty before the first attempt.
	LastAnswer string `json:"last_answer,omitempty"`
	// TraceID is the delivery's trace (the event's when the delivery has
	// none); LastAttemptTraceparent the last attempt's span, when the
	// engine still remembers it.
	TraceID                string   `json:"trace_id,omitempty"`
	LastAttemptTraceparent string   `json:"last_attempt_traceparent,omitempty"`
	Where                  Location `json:"where"`
	// Next is the next action, in words.
	Next string `json:"next"`
}

// SubscriptionBrief is the part of a subscription an operator needs to
// understand a delivery. It never holds the signing secret, and the URL's
// password is hidden.
type SubscriptionBrief struct {
	ID                  string                   `json:"subscription_id"`
	TenantID            string                   `json:"tenant_id"`
	Status              proto.SubscriptionStatus `json:"status"`
	URL                 string                   `json:"url"`
	ConsecutiveFailures int                      `json:"consecutive_failures"`
	DisableAfter        int                      `json:"disable_after_failures"`
	MaxRetries          int                      `json:"max_retries"`
}

// Location is where a delivery's work item is now.
type Location struct {
	// State is one of: done, redis_pending, bridge_processing,
	// legacy_retry, scheduled, held, ordered_line (queued or in flight on
	// its subscription's ordered line), jetstream (queued or in flight),
	// nowhere (not terminal yet no work item found), unknown.
	State  string `json:"state"`
	Detail string `json:"detail"`
	// ScheduledFor is when a scheduled delivery wakes up.
	ScheduledFor string `json:"scheduled_for,omitempty"`
	// Queue is the dispatch consumer's counters when JetStream was read.
	Queue *ConsumerCounts `json:"queue,omitempty"`
	// Breaker is the subscription's breaker on each replica that answered.
	Breaker []ReplicaBreaker `json:"breaker,omitempty"`
}

// ConsumerCounts are the engine consumer's queue counters.
type ConsumerCounts struct {
	Pending    uint64 `json:"pending"`
	AckPending int    `json:"ack_pending"`
}

// ReplicaBreaker is one replica's breaker for one subscription.
type ReplicaBreaker struct {
	Replica string `json:"replica"`
	State   string `json:"state"`
	// OpenUntil is when an open breaker lets a probe through.
	OpenUntil string `json:"open_until,omitempty"`
}

// ErrNotFound is wrapped when a delivery does not exist.
var ErrNotFound = errors.New("not found")

// Inspect gathers everything about delivery id. replicas are the engine
// replicas' status (StatusOf) for breaker state; nil means unknown.
func (t *Tool) Inspect(ctx context.Context, id string, replicas []Replica) (*Inspection, error) {
	rec, err := t.st.Delivery(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("delivery %q: %w (no delivery:%s record; it may have expired after 14 days)", id, ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("delivery %q: %w", id, err)
	}
	d := rec.Delivery
	in := &Inspection{Delivery: rec.Raw, Attempts: d.Attempts, TraceID: d.TraceID, LastAnswer: lastAnswer(d)}

	var sub *proto.Subscription
	if raw, err := t.st.Raw(ctx, store.EventKey(d.EventID)); err != nil {
		in.EventErr = describeErr(err)
	} else {
		in.Event = raw
		if ev, err := proto.ParseEvent(raw); err == nil && in.TraceID == "" {
			in.TraceID = ev.TraceID
		}
	}
	if raw, err := t.st.Raw(ctx, store.SubscriptionKey(d.SubscriptionID)); err != nil {
		in.SubscriptionErr = describeErr(err)
	} else if sub, err = proto.ParseSubscription(raw); err != nil {
		in.SubscriptionErr = "unreadable: " + err.Error()
	} else {
		in.Subscription = &SubscriptionBrief{
			ID: sub.SubscriptionID, TenantID: sub.TenantID, Status: sub.Status, URL: RedactURL(sub.URL),
			ConsecutiveFailures: sub.ConsecutiveFailures, DisableAfter: sub.DisableAfter(), MaxRetries: sub.Policy().Retries(),
		}
	}
	if tp, err := t.st.LastAttempt(ctx, id); err == nil {
		in.LastAttemptTraceparent = tp
	}
	in.Ordering = t.ordering(ctx, d.SubscriptionID)
	in.Where, err = t.locate(ctx, d, sub, in.Ordering)
	if err != nil {
		return nil, err
	}
	for _, r := range replicas {
		if b, ok := r.breakerOf(d.SubscriptionID); ok {
			in.Where.Breaker = append(in.Where.Breaker, b)
		}
	}
	in.Next = orderingNext(t.next(d, sub, in.Where), in.Ordering, in.Where)
	return in, nil
}

// locate finds the work item: Redis lists first (before the bridge moved
// it), then the JetStream subjects where waiting work lives.
func (t *Tool) locate(ctx context.Context, d *proto.Delivery, sub *proto.Subscription, o *OrderingBrief) (Location, error) {
	if d.Status.Terminal() {
		return Location{State: "done", Detail: "the delivery is " + string(d.Status) + "; no work item is kept for it"}, nil
	}
	bridges, err := t.st.Bridges(ctx)
	if err != nil {
		return Location{}, err
	}
	switch where, dueMs, err := t.st.InRedisQueue(ctx, d.DeliveryID, bridges); {
	case err != nil:
		return Location{}, err
	case where == store.PendingList:
		return Location{State: "redis_pending", Detail: "in dispatch:pending, waiting for a bridge to move it into JetStream"}, nil
	case where == store.RetryZSet:
		return Location{State: "legacy_retry", Detail: "in the reference service's dispatch:retry ZSET; a bridge promotes it when due"}, nil
	case where == store.LegacyDeferredZSet:
		at := proto.FormatInstant(time.UnixMilli(dueMs).UTC())
		return Location{State: "scheduled", ScheduledFor: at, Detail: "parked in jetrelay:deferred by a jetrelay before JetStream schedules, due " + at + "; a bridge moves it into dispatch:pending when it starts"}, nil
	case where != "":
		return Location{State: "bridge_processing", Detail: "in " + where + ": moved by a bridge, being published to JetStream"}, nil
	}
	if t.js == nil {
		return Location{State: "unknown", Detail: "not in Redis's dispatch lists; JetStream state unknown: " + t.jsWhy}, nil
	}
	stream, err := t.js.Stream(ctx, t.q.Stream)
	if err != nil {
		return Location{State: "unknown", Detail: fmt.Sprintf("JetStream stream %s: %v", t.q.Stream, err)}, nil
	}
	if m, err := stream.GetLastMsgForSubject(ctx, t.q.ScheduleSubject(d.DeliveryID)); err == nil {
		loc := Location{State: "scheduled", Detail: "a JetStream message schedule on " + m.Subject + " wakes it up"}
		if at, ok := scheduledAt(m.Header.Get(jetstream.ScheduleHeader)); ok {
			loc.ScheduledFor = proto.FormatInstant(at)
			loc.Detail += " at " + loc.ScheduledFor
		}
		return loc, nil
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return Location{}, fmt.Errorf("look up %s: %w", t.q.ScheduleSubject(d.DeliveryID), err)
	}
	if m, err := stream.GetLastMsgForSubject(ctx, t.q.HeldSubject(d.SubscriptionID, d.DeliveryID)); err == nil {
		why := "its subscription is not ACTIVE"
		if sub != nil {
			why = "its subscription is " + string(sub.Status)
		}
		return Location{State: "held", Detail: "held on " + m.Subject + ": " + why}, nil
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return Location{}, fmt.Errorf("look up held deliveries: %w", err)
	}
	if loc, ok, err := t.onLine(ctx, stream, d, o); ok || err != nil {
		return loc, err
	}
	loc := Location{State: "jetstream", Detail: "queued or in flight on " + t.q.Subject +
		" (JetStream cannot tell cheaply which, nor list in-flight ids)"}
	if cons, err := stream.Consumer(ctx, t.q.Consumer); err == nil {
		ci := cons.CachedInfo()
		loc.Queue = &ConsumerCounts{Pending: ci.NumPending, AckPending: ci.NumAckPending}
		if ci.NumPending == 0 && ci.NumAckPending == 0 {
			loc.State = "nowhere"
			loc.Detail = "no work item found: not in Redis's lists, not scheduled or held, and the consumer has nothing pending or in flight"
		}
	}
	return loc, nil
}

// next says in words what will happen to d, or what an operator can do.
func (t *Tool) next(d *proto.Delivery, sub *proto.Subscription, where Location) string {
	id := d.DeliveryID
	switch d.Status {
	case proto.DeliverySuccess:
		return "nothing: it was delivered"
	case proto.DeliveryFailed:
		return "nothing automatic: it failed for good. Send it again with `jetrelay deliveries requeue " + id + "`"
	}
	if d.AttemptedAt != nil && t.now().Sub(d.AttemptedAt.Time) > t.maxAge {
		return fmt.Sprintf("it is older than MAX_DELIVERY_AGE_MS (%s): the engine fails it without a send when it next sees it", t.maxAge)
	}
	if sub != nil && sub.Status != proto.SubscriptionActive {
		return fmt.Sprintf("waits until subscription %s is ACTIVE again (`jetrelay subscriptions set-status %s ACTIVE`); it fails as stale after MAX_DELIVERY_AGE_MS", sub.SubscriptionID, sub.SubscriptionID)
	}
	for _, b := range where.Breaker {
		if b.State == "open" {
			return fmt.Sprintf("the circuit breaker of %s is open on %s until %s: the delivery waits without using attempts, then a probe decides", d.SubscriptionID, b.Replica, b.OpenUntil)
		}
	}
	switch where.State {
	case "redis_pending", "bridge_processing", "legacy_retry":
		return "a bridge moves it into JetStream, then the engine attempts it"
	case "scheduled":
		if where.ScheduledFor != "" {
			return "the engine attempts it again at " + where.ScheduledFor
		}
		return "the engine attempts it again when its schedule fires"
	case "held":
		return "it is released when its subscription is ACTIVE again"
	case "jetstream", "ordered_line":
		return fmt.Sprintf("the engine attempts it (attempt %d)", d.Attempts+1)
	case "nowhere":
		return "nothing will: the work item is lost. The bridge's recovery re-drives PENDING records it moved; otherwise fail it and requeue it"
	}
	return "unknown: JetStream could not be read from here"
}

// lastAnswer describes the last attempt's outcome.
func lastAnswer(d *proto.Delivery) string {
	var parts []string
	// A send that got no answer is recorded with response_status 0.
	answered := d.ResponseStatus != nil && *d.ResponseStatus > 0
	if answered {
		parts = append(parts, fmt.Sprintf("HTTP %d", *d.ResponseStatus))
	}
	if d.ErrorMessage != nil && *d.ErrorMessage != "" && (!answered || *d.ErrorMessage != fmt.Sprintf("HTTP %d", *d.ResponseStatus)) {
		parts = append(parts, *d.ErrorMessage)
	}
	if d.ResponseTimeMs != nil {
		parts = append(parts, fmt.Sprintf("in %d ms", *d.ResponseTimeMs))
	}
	return strings.Join(parts, " ")
}

// scheduledAt parses a Nats-Schedule "@at <RFC3339>" header.
func scheduledAt(h string) (time.Time, bool) {
	v, ok := strings.CutPrefix(h, "@at ")
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
	return at, err == nil
}

func describeErr(err error) string {
	if errors.Is(err, store.ErrNotFound) {
		return "missing"
	}
	return err.Error()
}

// RedactURL hides a URL's whole user part (a password, or a NATS token
// written as the user name) as "***", as every operator output does.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User == nil {
		return raw
	}
	u.User = nil
	prefix := u.Scheme + "://"
	return prefix + "***@" + strings.TrimPrefix(u.String(), prefix)
}
