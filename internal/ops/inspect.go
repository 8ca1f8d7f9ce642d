package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jetrelay/jetrelay/internal/reconcile"
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
	// stuck (neither terminal nor queued anywhere, past the reconcile
	// margin), nowhere (in no queue, but within the margin: likely between
	// two hops), unknown.
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

// inspectReads bounds how often Inspect starts over when the delivery's
// record changed while it looked for the work item.
const inspectReads = 3

// Inspect gathers everything about delivery id. replicas are the engine
// replicas' status (StatusOf) for breaker state; nil means unknown.
//
// The engine writes a delivery's record before it moves the work item (a
// retry's outcome, then its wake-up), so a work item found after the
// record was read may belong to a newer record: "scheduled" beside the
// answer of the attempt before. Inspect reads the record again after
// locating and starts over when it changed, so the record it shows is at
// least as new as where it found the work item.
func (t *Tool) Inspect(ctx context.Context, id string, replicas []Replica) (*Inspection, error) {
	for range inspectReads {
		in, err := t.inspectOnce(ctx, id, replicas)
		if err != nil {
			return nil, err
		}
		again, err := t.st.Raw(ctx, store.DeliveryKey(id))
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("delivery %q: %w (its record expired or was deleted while it was inspected)", id, ErrNotFound)
		case err != nil:
			return nil, fmt.Errorf("delivery %q: read again: %w", id, err)
		case bytes.Equal(again, in.Delivery):
			return in, nil
		}
	}
	return nil, fmt.Errorf("delivery %q: its record changed on each of %d reads while it was inspected (a busy delivery); run again", id, inspectReads)
}

// inspectOnce is one read of everything Inspect shows: the record first,
// then what it points to and where its work item is.
func (t *Tool) inspectOnce(ctx context.Context, id string, replicas []Replica) (*Inspection, error) {
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
	if t.recordRead != nil {
		t.recordRead()
	}
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

// locate finds the work item where reconcile.Locator looks (Redis lists
// first, then the JetStream subjects of waiting work, then the work items),
// and calls a delivery stuck as the reconciler does.
func (t *Tool) locate(ctx context.Context, d *proto.Delivery, sub *proto.Subscription, o *OrderingBrief) (Location, error) {
	if d.Status.Terminal() {
		return Location{State: "done", Detail: "the delivery is " + string(d.Status) + "; no work item is kept for it"}, nil
	}
	places, err := t.loc.Locate(ctx, []*proto.Delivery{d})
	if err != nil {
		return Location{}, err
	}
	p := places[0]
	switch p.Kind {
	case reconcile.RedisPending:
		return Location{State: "redis_pending", Detail: "in dispatch:pending, waiting for a bridge to move it into JetStream"}, nil
	case reconcile.LegacyRetry:
		return Location{State: "legacy_retry", Detail: "in the reference service's dispatch:retry ZSET; a bridge promotes it when due"}, nil
	case reconcile.LegacyDeferred:
		at := proto.FormatInstant(p.At)
		return Location{State: "scheduled", ScheduledFor: at, Detail: "parked in jetrelay:deferred by a jetrelay before JetStream schedules, due " + at + "; a bridge moves it into dispatch:pending when it starts"}, nil
	case reconcile.Parked:
		at := proto.FormatInstant(p.At)
		why := "its subscription's intake hold has ended; a bridge publishes it at its next poll"
		if h, ok, err := t.st.IntakeHoldOf(ctx, d.SubscriptionID); err == nil && ok {
			why = fmt.Sprintf("its subscription is under an intake hold (%s, since %s, until %s unless renewed)", h.Reason, proto.FormatInstant(h.Since), proto.FormatInstant(h.Until))
		}
		return Location{State: "parked", ScheduledFor: at, Detail: "left in Redis (" + p.Where + ") by a bridge, never published: " + why + "; a bridge publishes it into JetStream when the hold ends, or at " + at + " at the latest for its send"}, nil
	case reconcile.BridgeProcessing:
		return Location{State: "bridge_processing", Detail: "in " + p.Where + ": moved by a bridge, being published to JetStream"}, nil
	case reconcile.Scheduled:
		loc := Location{State: "scheduled", Detail: "a JetStream message schedule on " + p.Where + " wakes it up"}
		if !p.At.IsZero() {
			loc.ScheduledFor = proto.FormatInstant(p.At)
			loc.Detail += " at " + loc.ScheduledFor
		}
		return loc, nil
	case reconcile.Held:
		why := "its subscription is not ACTIVE"
		if sub != nil {
			why = "its subscription is " + string(sub.Status)
		}
		return Location{State: "held", Detail: "held on " + p.Where + ": " + why}, nil
	case reconcile.WorkItem:
		if p.Where == t.q.OrderedSubject(d.SubscriptionID) {
			if stream, err := t.js.Stream(ctx, t.q.Stream); err == nil {
				if loc, ok, err := t.onLine(ctx, stream, d, o); ok || err != nil {
					return loc, err
				}
			}
		}
		loc := Location{State: "jetstream", Detail: "queued or in flight on " + t.q.Subject + " (JetStream cannot tell cheaply which)"}
		if stream, err := t.js.Stream(ctx, t.q.Stream); err == nil {
			if cons, err := stream.Consumer(ctx, t.q.Consumer); err == nil {
				ci := cons.CachedInfo()
				loc.Queue = &ConsumerCounts{Pending: ci.NumPending, AckPending: ci.NumAckPending}
			}
		}
		return loc, nil
	case reconcile.Nowhere:
		due := reconcile.Due(d, t.now().UnixMilli())
		if reconcile.Stuck(p, due, t.now(), t.margin) {
			return Location{State: "stuck", Detail: fmt.Sprintf("neither terminal nor queued anywhere: not in Redis's dispatch lists, not scheduled, held or a work item in JetStream, and due since %s (more than the reconcile margin, %s)", proto.FormatInstant(due), t.margin)}, nil
		}
		return Location{State: "nowhere", Detail: fmt.Sprintf("no work item found right now: not in Redis's dispatch lists, not scheduled, held or a work item in JetStream; it may be between two hops (due %s, within the reconcile margin of %s)", proto.FormatInstant(due), t.margin)}, nil
	}
	if t.js == nil {
		return Location{State: "unknown", Detail: "not in Redis's dispatch lists; JetStream state unknown: " + t.jsWhy}, nil
	}
	if p.Where == store.PendingList {
		return Location{State: "unknown", Detail: "dispatch:pending is too long to search for it; look again when the bridges have caught up"}, nil
	}
	return Location{State: "unknown", Detail: fmt.Sprintf("not in Redis's dispatch lists, not scheduled or held; %s holds %d work items, more than one look reads, so whether it is among them is unknown", t.q.Subject, p.WorkItems)}, nil
}

// next says in words what will happen to d, or what an operator can do.
func (t *Tool) next(d *proto.Delivery, sub *proto.Subscription, where Location) string {
	id := d.DeliveryID
	switch d.Status {
	case proto.DeliverySuccess:
		return "nothing: it was delivered"
	case proto.DeliveryFailed:
		return failedWhy(d, sub) + "nothing automatic: it failed for good. Send it again with `jetrelay deliveries requeue " + id + "`"
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
	case "parked":
		return "a bridge publishes it into JetStream when its subscription's intake hold ends (a success, or no engine renewing it), or at " + where.ScheduledFor + " at the latest; then the engine attempts it"
	case "jetstream", "ordered_line":
		return fmt.Sprintf("the engine attempts it (attempt %d)", d.Attempts+1)
	case "stuck":
		return "nothing on its own path: the reconciler puts it back at its next sweeps (every JETRELAY_RECONCILE_PERIOD), or put it back now with `jetrelay deliveries requeue " + id + "`"
	case "nowhere":
		return "probably moving between two hops; if it is still in no queue past the reconcile margin it is stuck, and the reconciler puts it back"
	}
	return "unknown: JetStream could not be read from here"
}

// failedWhy explains a FAILED delivery that had fewer sends than its policy
// allows after failing on a retryable answer: the subscription's circuit
// breaker held it (without using attempts) while the endpoint kept failing,
// its retry window (first attempt + the policy's delays + one open period)
// ended, and its last-chance send got the answer shown. Without this, an
// operator reads "attempts 1" beside "5 retries per delivery" as a bug.
func failedWhy(d *proto.Delivery, sub *proto.Subscription) string {
	if sub == nil || d.Attempts < 1 {
		return ""
	}
	sends := sub.Policy().Retries() + 1
	status := 0
	if d.ResponseStatus != nil {
		status = *d.ResponseStatus
	}
	// A 4xx other than 408/429 fails at once by design; only retryable
	// answers (none, 5xx, 408, 429) can end early because of the breaker.
	retryable := status == 0 || status >= 500 || status == 408 || status == 429
	if d.Attempts >= sends || !retryable {
		return ""
	}
	msg := "no answer"
	if d.ErrorMessage != nil && *d.ErrorMessage != "" {
		msg = *d.ErrorMessage
	}
	return fmt.Sprintf("%d of %d sends: the circuit breaker held it while the endpoint kept failing, its retry window ended, and its last send got %s. ",
		d.Attempts, sends, msg)
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
