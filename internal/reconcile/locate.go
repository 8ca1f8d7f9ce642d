package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Kinds of Place: where a delivery's work is.
const (
	// Done: the delivery is terminal; nothing is kept for it.
	Done = "done"
	// RedisPending: in dispatch:pending, waiting for a bridge.
	RedisPending = "redis_pending"
	// BridgeProcessing: in a bridge's (or the reference's) processing list.
	BridgeProcessing = "bridge_processing"
	// LegacyRetry: in the reference service's dispatch:retry ZSET.
	LegacyRetry = "legacy_retry"
	// LegacyDeferred: in jetrelay:deferred, left by an older jetrelay.
	LegacyDeferred = "legacy_deferred"
	// Parked: left in Redis by a bridge while its subscription is under
	// an intake hold (store.ParkedZSet); At is when it goes back at the
	// latest.
	Parked = "parked"
	// Scheduled: a JetStream wake-up will fire it.
	Scheduled = "scheduled"
	// Held: held for a subscription that is not ACTIVE.
	Held = "held"
	// WorkItem: a work item on the work subject, queued or in flight.
	WorkItem = "jetstream"
	// Nowhere: none of the above, proven by a complete look.
	Nowhere = "nowhere"
	// Unknown: JetStream could not be read completely (no connection, or
	// more work items than the scan may read).
	Unknown = "unknown"
)

// Place is where a delivery's work is.
type Place struct {
	Kind string
	// Where names the list, ZSET or subject.
	Where string
	// At is when a wake-up or a legacy entry is due, when known.
	At time.Time
	// WorkItems is how many work items the subject held when scanned.
	WorkItems uint64
}

// DefaultScanLimit bounds a scan of the work subject.
const DefaultScanLimit = 10000

// Locator finds where deliveries are: Redis's dispatch lists first, then
// the JetStream subjects of waiting work, then the ordered lines and the
// work items. That is the
// order work flows in, and every hop stores the next copy before it
// removes the last (the bridge publishes then LREMs; a wake-up or a held
// copy becomes a work item before it goes), so a delivery moving during
// the look is always seen somewhere. A hop the other way (a work item
// becoming a wake-up or a held copy) writes the delivery's record first,
// which is why the reconciler acts only on an unchanged record, and looks
// twice.
type Locator struct {
	st        *store.Store
	js        jetstream.JetStream // nil: JetStream unknown
	q         queue.Config
	scanLimit int
}

// NewLocator returns a Locator over st and js (nil when JetStream cannot be
// reached: nothing is then proven nowhere). scanLimit bounds the work items
// read in one look (0: DefaultScanLimit).
func NewLocator(st *store.Store, js jetstream.JetStream, q queue.Config, scanLimit int) *Locator {
	if scanLimit <= 0 {
		scanLimit = DefaultScanLimit
	}
	return &Locator{st: st, js: js, q: q.WithDefaults(), scanLimit: scanLimit}
}

// Locate finds where each of ds is. Redis and the per-delivery subjects
// cost a lookup or two per delivery; the work items are read at most once
// for the whole batch, and only when some delivery is in none of those.
func (l *Locator) Locate(ctx context.Context, ds []*proto.Delivery) ([]Place, error) {
	out := make([]Place, len(ds))
	bridges, err := l.st.Bridges(ctx)
	if err != nil {
		return nil, err
	}
	// Each Redis lookup is an LPOS, linear in the list: past scanLimit ids
	// waiting for a bridge, nothing is searched (a backlog that long is
	// being worked on; its deliveries are looked at again later).
	backlog, err := l.st.Backlogs(ctx)
	if err != nil {
		return nil, err
	}
	if backlog.Pending > int64(l.scanLimit) {
		for i, d := range ds {
			out[i] = Place{Kind: Unknown, Where: store.PendingList}
			if d.Status.Terminal() {
				out[i] = Place{Kind: Done}
			}
		}
		return out, nil
	}
	var rest []int
	for i, d := range ds {
		if d.Status.Terminal() {
			out[i] = Place{Kind: Done}
			continue
		}
		where, dueMs, err := l.st.InRedisQueue(ctx, d.DeliveryID, bridges)
		if err != nil {
			return nil, err
		}
		switch where {
		case "":
			at, parked, err := l.st.ParkedAt(ctx, d.SubscriptionID, d.DeliveryID)
			if err != nil {
				return nil, err
			}
			if parked {
				out[i] = Place{Kind: Parked, Where: store.ParkedZSet(d.SubscriptionID), At: at}
				continue
			}
			rest = append(rest, i)
		case store.PendingList:
			out[i] = Place{Kind: RedisPending, Where: where}
		case store.RetryZSet:
			out[i] = Place{Kind: LegacyRetry, Where: where, At: time.UnixMilli(dueMs).UTC()}
		case store.LegacyDeferredZSet:
			out[i] = Place{Kind: LegacyDeferred, Where: where, At: time.UnixMilli(dueMs).UTC()}
		default:
			out[i] = Place{Kind: BridgeProcessing, Where: where}
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	if l.js == nil {
		for _, i := range rest {
			out[i] = Place{Kind: Unknown}
		}
		return out, nil
	}
	stream, err := l.js.Stream(ctx, l.q.Stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", l.q.Stream, err)
	}
	var unseen []int
	for _, i := range rest {
		w, err := l.q.FindWaiting(ctx, stream, ds[i].SubscriptionID, ds[i].DeliveryID)
		switch {
		case err != nil:
			return nil, err
		case w.Subject == "":
			unseen = append(unseen, i)
		case w.Held:
			out[i] = Place{Kind: Held, Where: w.Subject}
		default:
			out[i] = Place{Kind: Scheduled, Where: w.Subject, At: w.At}
		}
	}
	if len(unseen) == 0 {
		return out, nil
	}
	// An ordered subscription's work items wait on its own line
	// (docs/ordering.md), one read of each line that a delivery may be on.
	lines := map[string]*queue.WorkItems{}
	var unlined []int
	for _, i := range unseen {
		sub := ds[i].SubscriptionID
		line, ok := lines[sub]
		if !ok {
			if line, err = l.q.ScanOrderedLine(ctx, stream, sub, l.scanLimit); err != nil {
				return nil, err
			}
			lines[sub] = line
		}
		switch {
		case !line.Complete:
			out[i] = Place{Kind: Unknown, Where: l.q.OrderedSubject(sub), WorkItems: line.Count}
		case line.Has(ds[i].DeliveryID):
			out[i] = Place{Kind: WorkItem, Where: l.q.OrderedSubject(sub), WorkItems: line.Count}
		default:
			unlined = append(unlined, i)
		}
	}
	if unseen = unlined; len(unseen) == 0 {
		return out, nil
	}
	work, err := l.q.ScanWork(ctx, stream, l.scanLimit)
	if err != nil {
		return nil, err
	}
	for _, i := range unseen {
		switch {
		case !work.Complete:
			out[i] = Place{Kind: Unknown, Where: l.q.Subject, WorkItems: work.Count}
		case work.Has(ds[i].DeliveryID):
			out[i] = Place{Kind: WorkItem, Where: l.q.Subject, WorkItems: work.Count}
		default:
			out[i] = Place{Kind: Nowhere, WorkItems: work.Count}
		}
	}
	return out, nil
}

// Due is when d should next have been handled: its next_retry_at when it
// has one later than its attempted_at (a retry or a put-off), else its
// attempted_at (a new or requeued delivery). indexMs stands in for a
// missing attempted_at.
func Due(d *proto.Delivery, indexMs int64) time.Time {
	due := time.UnixMilli(indexMs)
	if d.AttemptedAt != nil {
		due = d.AttemptedAt.Time
	}
	if d.NextRetryAt != nil && d.NextRetryAt.After(due) {
		due = d.NextRetryAt.Time
	}
	return due
}

// Stuck reports whether a delivery at p, due at due, is stuck at now: not
// terminal, found nowhere, and due more than margin ago.
func Stuck(p Place, due, now time.Time, margin time.Duration) bool {
	return p.Kind == Nowhere && now.Sub(due) > margin
}
