package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// WaitingPlace is where in the dispatch stream a delivery waits, when it waits
// for a time or an event rather than in line on Config.Subject.
type WaitingPlace struct {
	// Subject is the message's subject: the delivery's wake-up
	// (ScheduleSubject) or its held copy (HeldSubject); empty when it has
	// neither.
	Subject string
	// Held is true for a held copy, false for a wake-up.
	Held bool
	// At is when a wake-up fires (zero when unknown or held).
	At time.Time
}

// FindWaiting looks for deliveryID's wake-up, then for its held copy under
// subscriptionID: one last-message-per-subject lookup each, however large
// the stream. A delivery in neither gives a zero WaitingPlace. Both turn into a
// work item when they fire or are released, and the item is stored before
// they are removed: a caller that looks here first and at the work items
// (ScanWork) next cannot miss a delivery moving along that path.
func (c Config) FindWaiting(ctx context.Context, stream jetstream.Stream, subscriptionID, deliveryID string) (WaitingPlace, error) {
	subj := c.ScheduleSubject(deliveryID)
	m, err := stream.GetLastMsgForSubject(ctx, subj)
	switch {
	case err == nil:
		w := WaitingPlace{Subject: m.Subject}
		w.At, _ = ScheduledAt(m.Header.Get(ScheduleHeader))
		return w, nil
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		return WaitingPlace{}, fmt.Errorf("look up %s: %w", subj, err)
	}
	subj = c.HeldSubject(subscriptionID, deliveryID)
	m, err = stream.GetLastMsgForSubject(ctx, subj)
	switch {
	case err == nil:
		return WaitingPlace{Subject: m.Subject, Held: true}, nil
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		return WaitingPlace{}, fmt.Errorf("look up %s: %w", subj, err)
	}
	return WaitingPlace{}, nil
}

// ScheduledAt parses a Nats-Schedule "@at <RFC3339>" header.
func ScheduledAt(h string) (time.Time, bool) {
	v, ok := strings.CutPrefix(h, "@at ")
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
	return at, err == nil
}

// WorkItems is the set of delivery ids that have a work item on
// Config.Subject (queued, or handed to an engine and not yet settled: the
// stream keeps an item until it is acked).
type WorkItems struct {
	ids map[string]struct{}
	// Complete is false when the subject held more items than the scan
	// was allowed to read: then Has cannot prove an absence.
	Complete bool
	// Count is how many items the subject held when the scan began.
	Count uint64
}

// Has reports whether deliveryID has a work item. On an incomplete scan
// it says true for every id, the answer that never strands a delivery.
func (w *WorkItems) Has(deliveryID string) bool {
	if !w.Complete {
		return true
	}
	_, ok := w.ids[deliveryID]
	return ok
}

// ScanWork reads the delivery ids of every work item on c.Subject, at most
// limit of them. The item count comes first, from the stream's per-subject
// state (one request): on a healthy system between bursts it is 0 and
// nothing more is read. Otherwise the items are walked in stream order, one
// filtered lookup each, so a scan costs a round trip per queued item; the
// caller scans only when it has a delivery that nothing cheaper found, and
// a subject holding more than limit items gives an incomplete result.
func (c Config) ScanWork(ctx context.Context, stream jetstream.Stream, limit int) (*WorkItems, error) {
	return c.scanSubject(ctx, stream, c.WithDefaults().Subject, limit)
}

// ScanOrderedLine reads the ids on subscriptionID's ordered line
// (OrderedSubject) the way ScanWork reads the work subject: an ordered
// subscription's work items wait there, one line per subscription, and a
// strict line may hold one for as long as its head keeps failing.
func (c Config) ScanOrderedLine(ctx context.Context, stream jetstream.Stream, subscriptionID string, limit int) (*WorkItems, error) {
	return c.scanSubject(ctx, stream, c.OrderedSubject(subscriptionID), limit)
}

func (c Config) scanSubject(ctx context.Context, stream jetstream.Stream, subject string, limit int) (*WorkItems, error) {
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, fmt.Errorf("count work items on %s: %w", subject, err)
	}
	w := &WorkItems{ids: map[string]struct{}{}, Count: info.State.Subjects[subject]}
	if w.Count == 0 {
		w.Complete = true
		return w, nil
	}
	if w.Count > uint64(limit) {
		return w, nil
	}
	seq := info.State.FirstSeq
	// Items published while the walk runs extend it; the bound keeps a busy
	// subject from holding it forever.
	for read := 0; read <= limit; read++ {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			w.Complete = true
			return w, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read work items on %s: %w", subject, err)
		}
		w.ids[string(m.Data)] = struct{}{}
		seq = m.Sequence + 1
	}
	return w, nil
}
