package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Report is `jetrelay status`: the queue as Redis and JetStream hold it,
// the bridges, and what each replica alone knows (breakers, limits).
type Report struct {
	At        string       `json:"at"`
	Redis     RedisQueue   `json:"redis"`
	JetStream *StreamQueue `json:"jetstream,omitempty"`
	// JetStreamUnknown says why JetStream was not read.
	JetStreamUnknown string                 `json:"jetstream_unknown,omitempty"`
	Bridges          []store.BridgeInstance `json:"bridges"`
	// Engines are the engine replicas whose heartbeat is alive
	// (jetrelay:engine:<id>): what `jetrelay handback` waits for.
	Engines []LiveEngine `json:"engines"`
	// Reconciler is what the reconcilers found (nil before the first sweep).
	Reconciler *ReconcilerSummary `json:"reconciler,omitempty"`
	Replicas   []Replica          `json:"replicas"`
	// ReplicasUnknown says why no replica's own state is shown.
	ReplicasUnknown string `json:"replicas_unknown,omitempty"`
	// Warnings are deployment traps seen in the bridge registry, such as
	// live replicas each running an embedded JetStream (separate queues).
	Warnings []string `json:"warnings,omitempty"`
	// Ordering is the fleet default, the subscriptions' own modes and
	// the ordered lines with work (docs/ordering.md).
	Ordering *OrderingStatus `json:"ordering,omitempty"`
}

// LiveEngine is one engine replica whose heartbeat is alive.
type LiveEngine struct {
	ID        string `json:"id"`
	Heartbeat string `json:"heartbeat"`
	// ExpiresIn is how long the heartbeat lasts without a refresh.
	ExpiresIn string `json:"expires_in"`
}

// RedisQueue is the Redis side of the dispatch queue.
type RedisQueue struct {
	// Pending is dispatch:pending: ids admin pushed that no bridge moved yet.
	Pending int64 `json:"pending"`
	// OldestPendingAge is the age of the next id a bridge takes (from its
	// record's attempted_at), empty when none.
	OldestPendingAge string `json:"oldest_pending_age,omitempty"`
	LegacyRetry      int64  `json:"legacy_retry"`
	// LegacyDeferred is deliveries parked in jetrelay:deferred by engines
	// from before JetStream message schedules.
	LegacyDeferred int64 `json:"legacy_deferred"`
	Quarantined    int64 `json:"quarantined"`
	// Parked is never-sent deliveries bridges left in Redis under intake
	// holds, by subscription (docs/isolation.md, "Waiting at intake").
	Parked map[string]int64 `json:"parked,omitempty"`
}

// StreamQueue is the JetStream side.
type StreamQueue struct {
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	// Depth is work items not yet handed to an engine (consumer pending).
	Depth uint64 `json:"depth"`
	// AckPending is work items handed out and not yet settled: in flight.
	AckPending  int `json:"ack_pending"`
	Redelivered int `json:"redelivered"`
	// Scheduled is pending wake-ups (retries and put-offs).
	Scheduled int `json:"scheduled"`
	// Held is deliveries held for PAUSED/DISABLED subscriptions, in all and
	// by subscription.
	Held               int            `json:"held"`
	HeldBySubscription map[string]int `json:"held_by_subscription,omitempty"`
	// OldestWaitingAge is the age of the oldest work item still in the
	// stream (queued or in flight), empty when none.
	OldestWaitingAge string `json:"oldest_waiting_age,omitempty"`
}

// ReconcilerSummary is what the bridges' reconciler found: deliveries
// neither terminal nor queued anywhere. Every count is 0 on a healthy
// system.
type ReconcilerSummary struct {
	// Stuck is how many the last sweep found (acted on at the next one).
	Stuck int64 `json:"stuck"`
	// Requeued and Failed count those put back, and those failed at the
	// stale cutoff, since the first sweep on this Redis.
	Requeued int64 `json:"requeued"`
	Failed   int64 `json:"failed"`
	// By is the bridge that swept last, LastSweepAge how long ago.
	By           string `json:"by"`
	LastSweepAge string `json:"last_sweep_age"`
}

// Replica is what one jetrelay process alone knows: its breakers and
// per-subscription limits live in its memory.
type Replica struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Endpoint string `json:"endpoint,omitempty"`
	// Error says why the replica's state could not be read.
	Error    string        `json:"error,omitempty"`
	Breakers BreakerCounts `json:"breaker_counts"`
	// OpenBreakers lists breakers that are not closed.
	OpenBreakers []Breaker `json:"open_breakers,omitempty"`
	// Limits are the current per-subscription in-flight limits of the
	// subscriptions this replica is sending to.
	Limits []Limit         `json:"limits,omitempty"`
	Bridge *BridgeCounters `json:"bridge,omitempty"`
	// FailingLines are the ordered lines this replica has been unable to
	// pull for a while (engine.Config.LineFailingAfter): their
	// subscriptions get nothing, and the replica's /readyz says so.
	FailingLines []FailingLine `json:"failing_lines,omitempty"`
}

// FailingLine is an ordered line a replica cannot pull.
type FailingLine struct {
	SubscriptionID string `json:"subscription_id"`
	Since          string `json:"since"`
	Error          string `json:"error"`
}

// BreakerCounts count a replica's breakers by state.
type BreakerCounts struct {
	Closed   int `json:"closed"`
	HalfOpen int `json:"half_open"`
	Open     int `json:"open"`
}

// Breaker is one subscription's breaker that is not closed.
type Breaker struct {
	SubscriptionID string `json:"subscription_id"`
	State          string `json:"state"` // open or half_open
	OpenUntil      string `json:"open_until,omitempty"`
}

// Limit is one subscription's in-flight limit on a replica.
type Limit struct {
	SubscriptionID string `json:"subscription_id"`
	Limit          int    `json:"limit"`
	InFlight       int    `json:"in_flight"`
}

// BridgeCounters are a bridge's counters since it started.
type BridgeCounters struct {
	Moved, Published, Duplicates, Requeued, Recovered, Quarantined uint64
}

func (r Replica) breakerOf(sub string) (ReplicaBreaker, bool) {
	if r.Error != "" {
		return ReplicaBreaker{Replica: r.Name, State: "unknown: " + r.Error}, true
	}
	for _, b := range r.OpenBreakers {
		if b.SubscriptionID == sub {
			return ReplicaBreaker{Replica: r.Name, State: b.State, OpenUntil: b.OpenUntil}, true
		}
	}
	if r.Role == "bridge" {
		return ReplicaBreaker{}, false
	}
	return ReplicaBreaker{Replica: r.Name, State: "closed"}, true
}

// Status reads the cluster-wide state and adds replicas as given (a
// management endpoint's own replica, or those ReadReplicas fetched).
func (t *Tool) Status(ctx context.Context, replicas []Replica) (*Report, error) {
	now := t.now()
	rep := &Report{At: proto.FormatInstant(now), Replicas: replicas}
	qc, err := t.st.QueueCounts(ctx)
	if err != nil {
		return nil, err
	}
	rep.Redis = RedisQueue{Pending: qc.Pending, LegacyRetry: qc.LegacyRetry, LegacyDeferred: qc.LegacyDeferred, Quarantined: qc.Quarantined}
	if rep.Redis.Parked, err = t.st.ParkedCounts(ctx); err != nil {
		return nil, err
	}
	if qc.OldestPendingID != "" {
		if rec, err := t.st.Delivery(ctx, qc.OldestPendingID); err == nil && rec.AttemptedAt != nil {
			rep.Redis.OldestPendingAge = age(now, rec.AttemptedAt.Time)
		}
	}
	if rep.Bridges, err = t.st.Bridges(ctx); err != nil {
		return nil, err
	}
	live, err := t.st.LiveReplicas(ctx)
	if err != nil {
		return nil, err
	}
	rep.Engines = []LiveEngine{}
	for _, r := range live {
		if r.Role == "engine" {
			rep.Engines = append(rep.Engines, LiveEngine{ID: r.ID, Heartbeat: r.Heartbeat, ExpiresIn: r.ExpiresIn.Round(100 * time.Millisecond).String()})
		}
	}
	if msg := store.SeparateQueues(rep.Bridges, ""); msg != "" {
		rep.Warnings = append(rep.Warnings, msg)
	}
	switch sum, err := t.st.ReconcileSummary(ctx); {
	case err == nil:
		rep.Reconciler = &ReconcilerSummary{Stuck: sum.Stuck, Requeued: sum.Requeued, Failed: sum.Failed, By: sum.By, LastSweepAge: age(now, time.UnixMilli(sum.AtMs))}
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	if rep.Ordering, err = t.orderingStatus(ctx); err != nil {
		return nil, err
	}
	if t.js == nil {
		rep.JetStreamUnknown = t.jsWhy
		return rep, nil
	}
	if rep.JetStream, err = t.streamQueue(ctx, now); err != nil {
		rep.JetStream, rep.JetStreamUnknown = nil, err.Error()
	}
	return rep, nil
}

// streamQueue reads the dispatch stream's and consumer's counters.
func (t *Tool) streamQueue(ctx context.Context, now time.Time) (*StreamQueue, error) {
	q := &StreamQueue{Stream: t.q.Stream, Consumer: t.q.Consumer}
	stream, err := t.js.Stream(ctx, t.q.Stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", t.q.Stream, err)
	}
	cons, err := stream.Consumer(ctx, t.q.Consumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		// No engine ever ran: every work item in the stream is waiting.
		items, err := subjectCounts(ctx, stream, t.q.Subject)
		if err != nil {
			return nil, err
		}
		q.Depth = items[t.q.Subject]
	case err != nil:
		return nil, fmt.Errorf("consumer %s: %w", t.q.Consumer, err)
	default:
		ci := cons.CachedInfo()
		q.Depth, q.AckPending, q.Redelivered = ci.NumPending, ci.NumAckPending, ci.NumRedelivered
	}
	sched, err := subjectCounts(ctx, stream, t.q.ScheduleSubjects())
	if err != nil {
		return nil, err
	}
	for _, n := range sched {
		q.Scheduled += int(n)
	}
	held, err := subjectCounts(ctx, stream, t.q.HeldSubjects(""))
	if err != nil {
		return nil, err
	}
	prefix := t.q.HeldSubjects("")
	prefix = prefix[:len(prefix)-1]
	for subj, n := range held {
		q.Held += int(n)
		tok, _, _ := strings.Cut(strings.TrimPrefix(subj, prefix), ".")
		if sub, ok := queue.ParseSubjectToken(tok); ok {
			if q.HeldBySubscription == nil {
				q.HeldBySubscription = map[string]int{}
			}
			q.HeldBySubscription[sub] += int(n)
		}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", t.q.Stream, err)
	}
	if info.State.Msgs > 0 {
		m, err := stream.GetMsg(ctx, info.State.FirstSeq, jetstream.WithGetMsgSubject(t.q.Subject))
		switch {
		case err == nil:
			q.OldestWaitingAge = age(now, m.Time)
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return nil, fmt.Errorf("oldest work item: %w", err)
		}
	}
	return q, nil
}

// subjectCounts counts stream messages per subject under filter.
func subjectCounts(ctx context.Context, stream jetstream.Stream, filter string) (map[string]uint64, error) {
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("count %s: %w", filter, err)
	}
	return info.State.Subjects, nil
}

// age is a human age, to the second below an hour, to the minute above.
func age(now, t time.Time) string {
	d := max(now.Sub(t), 0)
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// sortReplicas orders replicas by name for stable output.
func sortReplicas(rs []Replica) {
	slices.SortFunc(rs, func(a, b Replica) int { return strings.Compare(a.Name, b.Name) })
}
