package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Undelivered is the status filter word for every status but SUCCESS.
const Undelivered = "undelivered"

// readBatch is how many delivery records one round trip reads.
const readBatch = 500

// ErrBadFilter is wrapped by every filter that cannot be used as given.
var ErrBadFilter = errors.New("bad filter")

// StatusSet is a set of delivery statuses; empty means every status.
type StatusSet map[proto.DeliveryStatus]bool

// ParseStatuses reads a comma-separated list of PENDING, RETRYING, SUCCESS,
// FAILED and undelivered (= PENDING, RETRYING, FAILED), in any case.
func ParseStatuses(s string) (StatusSet, error) {
	set := StatusSet{}
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		switch st := proto.DeliveryStatus(strings.ToUpper(w)); {
		case w == "":
		case strings.EqualFold(w, Undelivered):
			set[proto.DeliveryPending], set[proto.DeliveryRetrying], set[proto.DeliveryFailed] = true, true, true
		case st.Known():
			set[st] = true
		default:
			return nil, fmt.Errorf("%w: status %q is not PENDING, RETRYING, SUCCESS, FAILED or %s", ErrBadFilter, w, Undelivered)
		}
	}
	return set, nil
}

// String lists the set in a stable order.
func (s StatusSet) String() string {
	var out []string
	for _, st := range []proto.DeliveryStatus{proto.DeliveryPending, proto.DeliveryRetrying, proto.DeliverySuccess, proto.DeliveryFailed} {
		if s[st] {
			out = append(out, string(st))
		}
	}
	return strings.Join(out, ",")
}

// Filter selects deliveries. The zero value selects every delivery of every
// subscription in webhooks:_all.
type Filter struct {
	Statuses StatusSet
	// SubscriptionID limits the search to one subscription's index.
	SubscriptionID string
	// TenantID limits it to the subscriptions the tenant owns
	// (webhooks:{tenant}; __system__ for admin-plane ones).
	TenantID string
	// EventType matches the delivery's event_type exactly.
	EventType string
	// Since and Until bound attempted_at (inclusive); zero is unbounded.
	Since, Until time.Time
}

// Validate reports a filter that cannot match anything sensible.
func (f Filter) Validate() error {
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return fmt.Errorf("%w: --until %s is before --since %s", ErrBadFilter, proto.FormatInstant(f.Until), proto.FormatInstant(f.Since))
	}
	return nil
}

// matches applies the record-level part of f.
func (f Filter) matches(d *proto.Delivery) bool {
	if len(f.Statuses) > 0 && !f.Statuses[d.Status] {
		return false
	}
	return f.EventType == "" || d.EventType == f.EventType
}

// Row is one delivery in a listing.
type Row struct {
	DeliveryID     string               `json:"delivery_id"`
	SubscriptionID string               `json:"subscription_id"`
	EventID        string               `json:"event_id"`
	EventType      string               `json:"event_type,omitempty"`
	Status         proto.DeliveryStatus `json:"status"`
	AttemptedAt    string               `json:"attempted_at,omitempty"`
	Attempts       int                  `json:"attempts"`
	ResponseStatus *int                 `json:"response_status,omitempty"`
	ErrorMessage   string               `json:"error_message,omitempty"`
}

func rowOf(d *proto.Delivery) Row {
	r := Row{
		DeliveryID: d.DeliveryID, SubscriptionID: d.SubscriptionID, EventID: d.EventID, EventType: d.EventType,
		Status: d.Status, Attempts: d.Attempts, ResponseStatus: d.ResponseStatus,
	}
	if d.AttemptedAt != nil {
		r.AttemptedAt = proto.FormatInstant(d.AttemptedAt.Time)
	}
	if d.ErrorMessage != nil {
		r.ErrorMessage = *d.ErrorMessage
	}
	return r
}

// Page is one page of a listing.
type Page struct {
	Rows []Row `json:"deliveries"`
	// NextOffset is the offset of the next page, 0 when this is the last.
	NextOffset int `json:"next_offset,omitempty"`
	// Unreadable counts indexed deliveries whose record is gone (expired)
	// or cannot be read; they match no filter.
	Unreadable int `json:"unreadable,omitempty"`
}

// List returns the deliveries matching f, oldest attempted_at first,
// skipping offset matches and returning at most limit (0: all).
func (t *Tool) List(ctx context.Context, f Filter, offset, limit int) (Page, error) {
	var p Page
	matched := 0
	err := t.each(ctx, f, &p.Unreadable, func(rec *store.DeliveryRecord) bool {
		matched++
		if matched <= offset {
			return true
		}
		if limit > 0 && len(p.Rows) == limit {
			p.NextOffset = offset + limit
			return false
		}
		p.Rows = append(p.Rows, rowOf(rec.Delivery))
		return true
	})
	return p, err
}

// each calls fn with every delivery record matching f, oldest first, until
// fn returns false. Records that are gone or unreadable are counted in
// unreadable.
func (t *Tool) each(ctx context.Context, f Filter, unreadable *int, fn func(*store.DeliveryRecord) bool) error {
	if err := f.Validate(); err != nil {
		return err
	}
	subs, err := t.subscriptions(ctx, f)
	if err != nil {
		return err
	}
	var all []store.IndexedDelivery
	for _, sub := range subs {
		ids, err := t.st.IndexedDeliveries(ctx, sub, f.Since, f.Until)
		if err != nil {
			return err
		}
		all = append(all, ids...)
	}
	slices.SortStableFunc(all, func(a, b store.IndexedDelivery) int {
		return cmp.Or(cmp.Compare(a.AttemptedAtMs, b.AttemptedAtMs), strings.Compare(a.ID, b.ID))
	})
	for chunk := range slices.Chunk(all, readBatch) {
		ids := make([]string, len(chunk))
		for i, d := range chunk {
			ids[i] = d.ID
		}
		res, err := t.st.Deliveries(ctx, ids)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				*unreadable++
				continue
			}
			if f.matches(r.Record.Delivery) && !fn(r.Record) {
				return nil
			}
		}
	}
	return nil
}

// subscriptions are the subscription ids whose indexes f searches.
func (t *Tool) subscriptions(ctx context.Context, f Filter) ([]string, error) {
	if f.SubscriptionID != "" {
		if _, err := t.st.Raw(ctx, store.SubscriptionKey(f.SubscriptionID)); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				// A deleted subscription's index lives on until retention
				// trims it: still searchable, but say so if it is empty too.
				ids, ierr := t.st.IndexedDeliveries(ctx, f.SubscriptionID, time.Time{}, time.Time{})
				if ierr == nil && len(ids) == 0 {
					return nil, fmt.Errorf("%w: no subscription %q (no webhook:%s record and no deliveries:%s index)", ErrBadFilter, f.SubscriptionID, f.SubscriptionID, f.SubscriptionID)
				}
				return []string{f.SubscriptionID}, ierr
			}
			return nil, err
		}
		return []string{f.SubscriptionID}, nil
	}
	ids, err := t.st.SubscriptionIDs(ctx, f.TenantID)
	slices.Sort(ids)
	return ids, err
}
