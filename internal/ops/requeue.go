package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/time/rate"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// RequeueOptions tune a requeue.
type RequeueOptions struct {
	// Rate caps requeues per second (0: as fast as Redis takes them), so a
	// redrive of thousands does not flood a receiver that just recovered.
	Rate float64
	// DryRun reports what would be requeued and writes nothing.
	DryRun bool
	// Progress, when set, is called after each delivery with the counts so
	// far and the total.
	Progress func(done, total int)
}

// RequeueResult is what a requeue did.
type RequeueResult struct {
	DryRun bool `json:"dry_run"`
	// Requeued are the deliveries put back to PENDING and pushed (or, on a
	// dry run, that would be).
	Requeued []string `json:"requeued"`
	// Skipped are deliveries left alone, with why (not FAILED nor stuck:
	// already requeued, delivered, or still queued for the engine).
	Skipped []Skipped `json:"skipped,omitempty"`
}

// Skipped is a delivery a requeue left alone.
type Skipped struct {
	DeliveryID string `json:"delivery_id"`
	Reason     string `json:"reason"`
}

// ErrUnknownDeliveries is wrapped when ids name deliveries that do not
// exist; nothing is changed then.
var ErrUnknownDeliveries = errors.New("unknown deliveries")

// Requeue puts the FAILED deliveries among ids, and the stuck ones
// (PENDING or RETRYING, yet queued nowhere past the reconcile margin), back
// to PENDING with their attempts reset and pushes them onto dispatch:pending
// as admin enqueues a new delivery. A PENDING or RETRYING delivery that is
// still queued is skipped: requeueing it would send it twice. Each reset is a compare-and-set on the record, so a second
// run (or a concurrent one) finds them no longer FAILED and skips them: a
// delivery is sent once however often the command runs. Every id is
// checked first: an id with no record (or an unreadable one) fails the
// whole call before anything is written.
func (t *Tool) Requeue(ctx context.Context, ids []string, o RequeueOptions) (*RequeueResult, error) {
	ids = slices.Compact(slices.Clone(ids))
	var missing []string
	for chunk := range slices.Chunk(ids, readBatch) {
		res, err := t.st.Deliveries(ctx, chunk)
		if err != nil {
			return nil, err
		}
		for _, r := range res {
			if r.Err != nil {
				missing = append(missing, fmt.Sprintf("%s (%s)", r.ID, describeErr(r.Err)))
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w, nothing was requeued: %s", ErrUnknownDeliveries, strings.Join(missing, ", "))
	}
	return t.requeue(ctx, ids, o)
}

// RequeueMatching requeues every delivery matching f. f's statuses must be
// FAILED (the default when f names none): other statuses are still the
// engine's or delivered.
func (t *Tool) RequeueMatching(ctx context.Context, f Filter, o RequeueOptions) (*RequeueResult, error) {
	for st := range f.Statuses {
		if st != proto.DeliveryFailed {
			return nil, fmt.Errorf("%w: requeue takes only --status FAILED (a %s delivery is not finished: the engine still owns it, or it was delivered)", ErrBadFilter, st)
		}
	}
	f.Statuses = StatusSet{proto.DeliveryFailed: true}
	var ids []string
	var unreadable int
	if err := t.each(ctx, f, &unreadable, func(rec *store.DeliveryRecord) bool {
		ids = append(ids, rec.DeliveryID)
		return true
	}); err != nil {
		return nil, err
	}
	return t.requeue(ctx, ids, o)
}

func (t *Tool) requeue(ctx context.Context, ids []string, o RequeueOptions) (*RequeueResult, error) {
	res := &RequeueResult{DryRun: o.DryRun, Requeued: []string{}}
	var lim *rate.Limiter
	if o.Rate > 0 && !o.DryRun {
		lim = rate.NewLimiter(rate.Limit(o.Rate), 1)
	}
	for i, id := range ids {
		if lim != nil {
			if err := lim.Wait(ctx); err != nil {
				return res, fmt.Errorf("requeue stopped after %d of %d: %w", i, len(ids), err)
			}
		}
		rec, err := t.st.Requeue(ctx, id, t.now(), o.DryRun)
		var skip string
		if errors.Is(err, store.ErrNotRequeueable) && !rec.Status.Terminal() {
			skip, err = t.requeueStuck(ctx, rec, o.DryRun)
		}
		switch {
		case skip != "":
			res.Skipped = append(res.Skipped, Skipped{DeliveryID: id, Reason: skip})
		case err == nil:
			res.Requeued = append(res.Requeued, id)
		case errors.Is(err, store.ErrNotRequeueable):
			res.Skipped = append(res.Skipped, Skipped{DeliveryID: id, Reason: "status is " + string(rec.Status) + ", not FAILED"})
		case errors.Is(err, store.ErrNotFound):
			res.Skipped = append(res.Skipped, Skipped{DeliveryID: id, Reason: "record gone"})
		default:
			return res, fmt.Errorf("requeue stopped after %d of %d: %w", i, len(ids), err)
		}
		if o.Progress != nil {
			o.Progress(i+1, len(ids))
		}
	}
	return res, nil
}

// requeueStuck requeues rec, a PENDING or RETRYING delivery, if it is
// stuck: neither terminal nor queued anywhere, past the reconcile margin.
// Two looks in a row must agree, and the reset is a compare-and-set on the
// bytes read before them, so a delivery that is still queued, or that an
// engine handles meanwhile, is never pushed a second time. It returns why
// it left rec alone, or "" when it requeued it (or, on a dry run, would).
func (t *Tool) requeueStuck(ctx context.Context, rec *store.DeliveryRecord, dryRun bool) (string, error) {
	for range 2 {
		where, err := t.locate(ctx, rec.Delivery, nil, nil)
		if err != nil {
			return "", err
		}
		if where.State == "nowhere" {
			return fmt.Sprintf("status is %s and it is in no queue, but due less than the reconcile margin (%s) ago: it may be between two hops; look again later", rec.Status, t.margin), nil
		}
		if where.State == "unknown" {
			return fmt.Sprintf("status is %s and whether it is still queued is unknown (%s): only FAILED or stuck deliveries are requeued", rec.Status, where.Detail), nil
		}
		if where.State != "stuck" {
			return fmt.Sprintf("status is %s and it is still queued (%s): the engine owns it; only FAILED or stuck deliveries are requeued", rec.Status, where.State), nil
		}
	}
	if dryRun {
		return "", nil
	}
	_, err := t.st.RequeueRecord(ctx, rec, t.now())
	if errors.Is(err, store.ErrConflict) {
		return "it changed while it was being requeued (an engine or a reconciler handled it); look again", nil
	}
	return "", err
}
