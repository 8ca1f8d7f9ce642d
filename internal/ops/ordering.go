package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"

	"github.com/jetrelay/jetrelay/proto"
)

// maxLineWalk bounds how far Inspect walks an ordered line to find a
// delivery's place (one direct read per item before it).
const maxLineWalk = 2000

// OrderingBrief is how a subscription's deliveries are ordered
// (docs/ordering.md) and where that comes from.
type OrderingBrief struct {
	// Mode is none, first-attempt or strict.
	Mode proto.Ordering `json:"mode"`
	// Source is "subscription" (its own setting) or "fleet default"
	// (JETRELAY_ORDERING of this process).
	Source string `json:"source"`
}

// ordering reads subscriptionID's ordering; nil when its settings record
// cannot be read.
func (t *Tool) ordering(ctx context.Context, subscriptionID string) *OrderingBrief {
	set, _, err := t.st.Settings(ctx, subscriptionID)
	if err != nil {
		return nil
	}
	if own, err := proto.ParseOrdering(set.Ordering); err == nil && own != "" {
		return &OrderingBrief{Mode: own, Source: "subscription"}
	}
	return &OrderingBrief{Mode: t.fleetOrdering.Or(proto.OrderingNone), Source: "fleet default"}
}

// onLine finds d on its subscription's ordered line: its place, and what
// it waits for.
func (t *Tool) onLine(ctx context.Context, stream jetstream.Stream, d *proto.Delivery, o *OrderingBrief) (Location, bool, error) {
	subject := t.q.OrderedSubject(d.SubscriptionID)
	var seq uint64
	for place := 1; place <= maxLineWalk; place++ {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return Location{}, false, nil
		}
		if err != nil {
			return Location{}, false, fmt.Errorf("look up the ordered line %s: %w", subject, err)
		}
		if string(m.Data) == d.DeliveryID {
			mode := "none: what is left on it goes out one at a time"
			if o != nil {
				mode = string(o.Mode)
			}
			return Location{State: "ordered_line", Detail: fmt.Sprintf(
				"place %d on %s, its subscription's ordered line (%s): sent once the %d before it are done; a requeued delivery joins the end",
				place, subject, mode, place-1)}, true, nil
		}
		seq = m.Sequence + 1
	}
	return Location{State: "ordered_line", Detail: fmt.Sprintf("on %s, its subscription's ordered line, behind more than %d others", subject, maxLineWalk)}, true, nil
}

// orderingNext adds to next what ordering changes about it.
func orderingNext(next string, o *OrderingBrief, where Location) string {
	if o == nil || !o.Mode.Ordered() {
		return next
	}
	switch where.State {
	case "redis_pending", "bridge_processing":
		return next + "; its subscription is ordered (" + string(o.Mode) + "): it joins the end of its line, so a requeued delivery goes out after everything queued before it"
	case "scheduled":
		if o.Mode == proto.OrderingFirstAttempt {
			return next + "; its retries left its subscription's ordered line (first-attempt)"
		}
	}
	return next
}

// OrderingStatus is the ordering part of `jetrelay status`.
type OrderingStatus struct {
	// FleetDefault is JETRELAY_ORDERING as this process has it.
	FleetDefault proto.Ordering `json:"fleet_default"`
	// Subscriptions are the subscriptions with a mode of their own.
	Subscriptions map[string]proto.Ordering `json:"subscriptions,omitempty"`
	// Lines are the ordered lines holding work items (queued or in
	// flight), by subscription.
	Lines map[string]uint64 `json:"lines,omitempty"`
}

// orderingStatus reads the ordering index and, when JetStream answers,
// the ordered lines with work (the rest of the report says why it did not).
func (t *Tool) orderingStatus(ctx context.Context) (*OrderingStatus, error) {
	own, err := t.st.Orderings(ctx)
	if err != nil {
		return nil, err
	}
	s := &OrderingStatus{FleetDefault: t.fleetOrdering.Or(proto.OrderingNone), Subscriptions: own}
	if t.js != nil {
		s.Lines, _ = queue.OrderedLines(ctx, t.js, t.q)
	}
	return s, nil
}

// writeOrdering renders OrderingStatus as status rows.
func writeOrdering(row func(k, v string), o *OrderingStatus) {
	if o == nil {
		return
	}
	own := make([]string, 0, len(o.Subscriptions))
	for _, sub := range slices.Sorted(maps.Keys(o.Subscriptions)) {
		own = append(own, sub+": "+string(o.Subscriptions[sub]))
	}
	row("ordering", fmt.Sprintf("fleet default %s; own settings: %s", o.FleetDefault, orDash(strings.Join(own, ", "))))
	lines := make([]string, 0, len(o.Lines))
	for _, sub := range slices.Sorted(maps.Keys(o.Lines)) {
		lines = append(lines, fmt.Sprintf("%s: %d", sub, o.Lines[sub]))
	}
	if len(lines) > 0 {
		row("ordered lines (queued or in flight)", strings.Join(lines, "; "))
	}
}
