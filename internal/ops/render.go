package ops

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tidwall/gjson"
)

// Table output for people; --json prints the same values for scripts.

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 2, 4, 2, ' ', 0) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeList(w io.Writer, p Page) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "DELIVERY\tSTATUS\tATTEMPTS\tATTEMPTED_AT\tEVENT_TYPE\tSUBSCRIPTION\tLAST_ERROR")
	for _, r := range p.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.DeliveryID, r.Status, r.Attempts, orDash(r.AttemptedAt),
			orDash(r.EventType), r.SubscriptionID, orDash(cut(r.ErrorMessage, 60)))
	}
	summary := fmt.Sprintf("shown: %d", len(p.Rows))
	if p.Unreadable > 0 {
		summary += fmt.Sprintf("; %d indexed deliveries skipped (record expired or unreadable)", p.Unreadable)
	}
	return endPage(w, tw, summary, int64(p.NextOffset))
}

// endPage flushes a page's table and writes its summary line, naming the
// next page when there is one.
func endPage(w io.Writer, tw *tabwriter.Writer, summary string, next int64) error {
	if err := tw.Flush(); err != nil {
		return err
	}
	if next > 0 {
		summary += fmt.Sprintf("; more with --offset %d", next)
	}
	_, err := fmt.Fprintln(w, summary)
	return err
}

func writeInspection(w io.Writer, in *Inspection) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	d := in.Delivery
	row("delivery", field(d, "delivery_id"))
	row("status", field(d, "status"))
	row("attempts", fmt.Sprint(in.Attempts))
	row("last answer", orDash(in.LastAnswer))
	row("attempted at", orDash(field(d, "attempted_at")))
	if v := field(d, "completed_at"); v != "" {
		row("completed at", v)
	}
	if v := field(d, "next_retry_at"); v != "" {
		row("next retry at", v)
	}
	event := field(d, "event_id") + " " + field(d, "event_type")
	if in.EventErr != "" {
		event += " (event record " + in.EventErr + ")"
	} else {
		event += " tenant " + field(in.Event, "tenant_id")
		if scope := field(in.Event, "scope"); scope != "" {
			event += " scope " + scope
		}
	}
	row("event", event)
	if s := in.Subscription; s != nil {
		row("subscription", fmt.Sprintf("%s (tenant %s) %s", s.ID, s.TenantID, s.Status))
		row("url", s.URL)
		row("failures", fmt.Sprintf("%d consecutive (disabled at %d); %d retries per delivery", s.ConsecutiveFailures, s.DisableAfter, s.MaxRetries))
	} else {
		row("subscription", "unavailable: "+in.SubscriptionErr)
	}
	if o := in.Ordering; o != nil {
		row("ordering", fmt.Sprintf("%s (%s)", o.Mode, o.Source))
	}
	row("trace id", orDash(in.TraceID))
	if in.LastAttemptTraceparent != "" {
		row("last attempt", in.LastAttemptTraceparent)
	}
	row("where", in.Where.State+": "+in.Where.Detail)
	if q := in.Where.Queue; q != nil {
		row("queue", fmt.Sprintf("%d waiting, %d in flight on the consumer", q.Pending, q.AckPending))
	}
	for _, b := range in.Where.Breaker {
		v := b.State
		if b.OpenUntil != "" {
			v += " until " + b.OpenUntil
		}
		row("breaker", b.Replica+": "+v)
	}
	row("next", in.Next)
	return tw.Flush()
}

func writeRequeue(w io.Writer, r *RequeueResult) error {
	verb := "requeued"
	if r.DryRun {
		verb = "would requeue"
	}
	for _, id := range r.Requeued {
		fmt.Fprintf(w, "%s %s\n", verb, id)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.DeliveryID, s.Reason)
	}
	_, err := fmt.Fprintf(w, "%s: %d, skipped: %d\n", verb, len(r.Requeued), len(r.Skipped))
	return err
}

func writeQuarantine(w io.Writer, p *QuarantinePage) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "DELIVERY\tQUARANTINED_AT\tREASON\tPAYLOAD")
	for _, e := range p.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", orDash(e.DeliveryID), orDash(e.QuarantinedAt), orDash(e.Reason), orDash(cut(e.Payload, 60)))
	}
	return endPage(w, tw, fmt.Sprintf("%d of %d entries", len(p.Entries), p.Total), p.NextOffset)
}

func writeStatus(w io.Writer, r *Report) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("redis dispatch:pending", fmt.Sprintf("%d (oldest %s)", r.Redis.Pending, orDash(r.Redis.OldestPendingAge)))
	row("redis dispatch:retry (legacy)", fmt.Sprint(r.Redis.LegacyRetry))
	if r.Redis.LegacyDeferred > 0 {
		row("redis jetrelay:deferred (legacy)", fmt.Sprint(r.Redis.LegacyDeferred))
	}
	for _, sub := range slices.Sorted(maps.Keys(r.Redis.Parked)) {
		row("redis parked at intake: "+sub, fmt.Sprint(r.Redis.Parked[sub]))
	}
	row("quarantined (dispatch:failed)", fmt.Sprint(r.Redis.Quarantined))
	if q := r.JetStream; q != nil {
		row("queue depth", fmt.Sprintf("%d (oldest waiting %s)", q.Depth, orDash(q.OldestWaitingAge)))
		row("in flight (ack pending)", fmt.Sprint(q.AckPending))
		row("redelivered", fmt.Sprint(q.Redelivered))
		row("scheduled (retries, put-offs)", fmt.Sprint(q.Scheduled))
		held := fmt.Sprint(q.Held)
		for _, sub := range slices.Sorted(maps.Keys(q.HeldBySubscription)) {
			held += fmt.Sprintf("; %s: %d", sub, q.HeldBySubscription[sub])
		}
		row("held (inactive subscriptions)", held)
	} else {
		row("jetstream", "unknown: "+r.JetStreamUnknown)
	}
	var alive []string
	for _, b := range r.Bridges {
		state := "dead"
		if b.Alive {
			state = "alive"
		}
		alive = append(alive, fmt.Sprintf("%s %s (%d processing)", b.ID, state, b.Processing))
	}
	row("bridges", orDash(strings.Join(alive, "; ")))
	var engines []string
	for _, e := range r.Engines {
		engines = append(engines, e.ID+" alive")
	}
	row("engines", orDash(strings.Join(engines, "; ")))
	for _, w := range r.Warnings {
		row("WARNING", w)
	}
	if rc := r.Reconciler; rc != nil {
		row("reconciler (stuck deliveries)", fmt.Sprintf("%d stuck now; %d put back, %d failed as stale in all (last sweep %s ago by %s)", rc.Stuck, rc.Requeued, rc.Failed, orDash(rc.LastSweepAge), orDash(rc.By)))
	} else {
		row("reconciler (stuck deliveries)", "no sweep yet (a bridge sweeps every JETRELAY_RECONCILE_PERIOD)")
	}
	writeOrdering(row, r.Ordering)
	if len(r.Replicas) == 0 {
		row("replicas", "unknown: "+orDash(r.ReplicasUnknown))
	}
	for _, rp := range r.Replicas {
		if rp.Error != "" {
			row("replica "+rp.Name, "unknown: "+rp.Error)
			continue
		}
		b := rp.Breakers
		row("replica "+rp.Name, fmt.Sprintf("role %s; breakers %d closed, %d half-open, %d open", rp.Role, b.Closed, b.HalfOpen, b.Open))
		for _, ob := range rp.OpenBreakers {
			row("  breaker "+ob.SubscriptionID, strings.TrimSpace(ob.State+" "+untilText(ob.OpenUntil)))
		}
		for _, l := range rp.Limits {
			row("  limit "+l.SubscriptionID, fmt.Sprintf("%d in flight of %d", l.InFlight, l.Limit))
		}
		for _, l := range rp.FailingLines {
			row("  NOT READY: ordered line "+l.SubscriptionID, "cannot be pulled since "+l.Since+": "+l.Error)
		}
	}
	return tw.Flush()
}

func untilText(t string) string {
	if t == "" {
		return ""
	}
	return "until " + t
}

func writeEmit(w io.Writer, r *EmitResult) error {
	fmt.Fprintf(w, "event_id: %s\ntrace_id: %s\n", r.EventID, r.TraceID)
	for _, id := range r.DeliveryIDs {
		fmt.Fprintf(w, "delivery_id: %s\n", id)
	}
	if r.Hint != "" {
		fmt.Fprintf(w, "no deliveries: %s\n", r.Hint)
	}
	return nil
}

// cut shortens s to n runes for a table cell.
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// field reads a top-level field of a JSON record for display ("" when it
// is missing or null).
func field(raw []byte, name string) string { return gjson.GetBytes(raw, name).String() }
