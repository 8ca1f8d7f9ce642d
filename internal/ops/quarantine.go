package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// QuarantineEntry is one dispatch:failed entry: a work item the bridge or
// the engine could not process (a malformed id, an unreadable record).
type QuarantineEntry struct {
	DeliveryID    string `json:"delivery_id"`
	Reason        string `json:"reason"`
	QuarantinedAt string `json:"quarantined_at,omitempty"`
	// Payload is the offending record as it was, cut to 64 KiB.
	Payload          string `json:"payload,omitempty"`
	PayloadTruncated bool   `json:"payload_truncated,omitempty"`
	// Raw is the entry exactly as stored (what requeue removes).
	Raw string `json:"-"`
}

// QuarantinePage is one page of dispatch:failed, newest first.
type QuarantinePage struct {
	Entries    []QuarantineEntry `json:"entries"`
	Total      int64             `json:"total"`
	NextOffset int64             `json:"next_offset,omitempty"`
}

// QuarantineList reads limit entries of dispatch:failed from offset.
func (t *Tool) QuarantineList(ctx context.Context, offset, limit int64) (*QuarantinePage, error) {
	if offset < 0 || limit < 1 {
		return nil, fmt.Errorf("%w: offset must be ≥ 0 and limit ≥ 1", ErrBadFilter)
	}
	raws, total, err := t.st.QuarantineEntries(ctx, offset, limit)
	if err != nil {
		return nil, err
	}
	p := &QuarantinePage{Entries: make([]QuarantineEntry, 0, len(raws)), Total: total}
	for _, raw := range raws {
		p.Entries = append(p.Entries, parseEntry(raw))
	}
	if next := offset + int64(len(raws)); next < total {
		p.NextOffset = next
	}
	return p, nil
}

// parseEntry reads both jetrelay's and upstream's entry shape; an entry
// that is not JSON is shown as its own payload.
func parseEntry(raw string) QuarantineEntry {
	var e struct {
		DeliveryID       string `json:"delivery_id"`
		Reason           string `json:"reason"`
		QuarantinedAtMs  int64  `json:"quarantined_at_ms"`
		Payload          string `json:"payload"`
		PayloadTruncated bool   `json:"payload_truncated"`
	}
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return QuarantineEntry{Reason: "unreadable entry", Payload: raw, Raw: raw}
	}
	out := QuarantineEntry{DeliveryID: e.DeliveryID, Reason: e.Reason, Payload: e.Payload, PayloadTruncated: e.PayloadTruncated, Raw: raw}
	if e.QuarantinedAtMs > 0 {
		out.QuarantinedAt = proto.FormatInstant(time.UnixMilli(e.QuarantinedAtMs).UTC())
	}
	return out
}

// QuarantineRequeue sends quarantined deliveries back to dispatch:pending
// once their record can be processed again (an operator fixed it): each
// entry is removed and its id pushed in one step, so running it twice
// pushes once. ids selects entries by delivery id; all selects every
// entry. Entries whose record is still missing, unreadable or already
// final are left in quarantine and reported as skipped.
func (t *Tool) QuarantineRequeue(ctx context.Context, ids []string, all, dryRun bool) (*RequeueResult, error) {
	if len(ids) == 0 && !all {
		return nil, fmt.Errorf("%w: name delivery ids or --all", ErrBadFilter)
	}
	_, total, err := t.st.QuarantineEntries(ctx, 0, 1)
	if err != nil {
		return nil, err
	}
	raws, _, err := t.st.QuarantineEntries(ctx, 0, max(total, 1))
	if err != nil {
		return nil, err
	}
	var picked []QuarantineEntry
	found := map[string]bool{}
	for _, raw := range raws {
		e := parseEntry(raw)
		if e.DeliveryID != "" && (all || slices.Contains(ids, e.DeliveryID)) {
			picked = append(picked, e)
			found[e.DeliveryID] = true
		}
	}
	var unknown []string
	for _, id := range ids {
		if !found[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%w, nothing was requeued: not in dispatch:failed: %s", ErrUnknownDeliveries, strings.Join(unknown, ", "))
	}
	res := &RequeueResult{DryRun: dryRun, Requeued: []string{}}
	for _, e := range picked {
		rec, err := t.st.Delivery(ctx, e.DeliveryID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			res.Skipped = append(res.Skipped, Skipped{e.DeliveryID, "record missing"})
			continue
		case errors.Is(err, store.ErrCorrupt):
			res.Skipped = append(res.Skipped, Skipped{e.DeliveryID, "record still unreadable: fix delivery:" + e.DeliveryID + " first"})
			continue
		case err != nil:
			return res, err
		case rec.Status.Terminal():
			res.Skipped = append(res.Skipped, Skipped{e.DeliveryID, "record is " + string(rec.Status) + " (use `jetrelay deliveries requeue` for FAILED ones)"})
			continue
		}
		if dryRun {
			res.Requeued = append(res.Requeued, e.DeliveryID)
			continue
		}
		ok, err := t.st.ReleaseQuarantined(ctx, e.Raw, e.DeliveryID)
		if err != nil {
			return res, err
		}
		if ok {
			res.Requeued = append(res.Requeued, e.DeliveryID)
		}
	}
	return res, nil
}
