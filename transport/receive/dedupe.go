package receive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// ClaimState is what a Store answers to a claim.
type ClaimState int

const (
	// Claimed means the caller now holds the event for the lease and must
	// Complete or Release it.
	Claimed ClaimState = iota + 1
	// Done means the event was already processed: a duplicate.
	Done
	// InProgress means another claim on the event is live: the event may or
	// may not be processed yet, so the caller should ask for a retry later.
	InProgress
)

// String names the state for logs.
func (s ClaimState) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case Done:
		return "done"
	case InProgress:
		return "in_progress"
	}
	return fmt.Sprintf("ClaimState(%d)", int(s))
}

// Store records which event ids were processed. Implementations must be safe
// for concurrent use by many processes: two concurrent claims of one event id
// must never both return Claimed while the first claim's lease is live.
//
// A token identifies one claim, so that a claim whose lease ran out and was
// taken over is not released by its first, late owner.
type Store interface {
	// Claim takes eventID for processing until lease ends, unless it is
	// already done (Done) or claimed by a live lease (InProgress). An
	// expired claim is taken over.
	Claim(ctx context.Context, eventID, token string, lease time.Duration) (ClaimState, error)
	// Complete marks eventID processed, so later claims answer Done for as
	// long as the store keeps it (its TTL or retention).
	Complete(ctx context.Context, eventID, token string) error
	// Release forgets the claim made with token, so the next delivery of
	// eventID is processed. It does nothing when the claim is no longer
	// token's.
	Release(ctx context.Context, eventID, token string) error
}

// DefaultLease is how long a claim holds an event while its handler runs. It
// must be longer than the slowest handler: a handler still running when its
// lease ends may run twice. A crashed receiver's claim blocks retries of its
// event for at most this long.
const DefaultLease = 5 * time.Minute

// Outcome says what Deduper.Do did.
type Outcome int

const (
	// Processed means fn ran and returned nil; the event is now done.
	Processed Outcome = iota + 1
	// Duplicate means the event was already processed; fn did not run.
	Duplicate
	// Busy means another claim on the event is live; fn did not run and the
	// delivery should be retried later.
	Busy
	// Failed means fn ran and returned an error; the claim was released so a
	// retry is processed.
	Failed
)

// String names the outcome for logs.
func (o Outcome) String() string {
	switch o {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	case Busy:
		return "busy"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Deduper runs a handler at most once per event id, with the claim, complete
// and release protocol described in the package doc. It is safe for
// concurrent use.
type Deduper struct {
	store Store
	lease time.Duration
}

// DeduperOption configures a Deduper.
type DeduperOption func(*Deduper)

// WithLease sets how long a claim holds an event (DefaultLease when d <= 0).
func WithLease(d time.Duration) DeduperOption {
	return func(dd *Deduper) {
		if d > 0 {
			dd.lease = d
		}
	}
}

// NewDeduper returns a Deduper recording event ids in store.
func NewDeduper(store Store, opts ...DeduperOption) *Deduper {
	d := &Deduper{store: store, lease: DefaultLease}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Do runs fn unless eventID was already processed or is being processed. fn
// runs with the claim held; its error is returned as is (with Failed) after
// the claim is released. A Store error is returned with outcome 0 and fn does
// not run: without a claim there is no safe answer but "retry later". A
// panic in fn releases the claim and panics on.
func (d *Deduper) Do(ctx context.Context, eventID string, fn func(context.Context) error) (Outcome, error) {
	if !ValidEventID(eventID) {
		return 0, ErrNoEventID
	}
	token := newToken()
	state, err := d.store.Claim(ctx, eventID, token, d.lease)
	if err != nil {
		return 0, fmt.Errorf("receive: claim %s: %w", eventID, err)
	}
	switch state {
	case Done:
		return Duplicate, nil
	case InProgress:
		return Busy, nil
	case Claimed:
	default:
		return 0, fmt.Errorf("receive: store answered %v to a claim", state)
	}
	released := false
	defer func() {
		if !released {
			// fn panicked: give the event back before the panic unwinds.
			_ = d.store.Release(context.WithoutCancel(ctx), eventID, token)
		}
	}()
	if err := fn(ctx); err != nil {
		released = true
		if rerr := d.store.Release(context.WithoutCancel(ctx), eventID, token); rerr != nil {
			return Failed, errors.Join(err, fmt.Errorf("receive: release %s: %w", eventID, rerr))
		}
		return Failed, err
	}
	released = true
	if err := d.store.Complete(context.WithoutCancel(ctx), eventID, token); err != nil {
		// The work is done but not recorded: a retry may run it again.
		// Report it; the caller has nothing better to do than log it.
		return Processed, fmt.Errorf("receive: complete %s: %w", eventID, err)
	}
	return Processed, nil
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
