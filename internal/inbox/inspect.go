package inbox

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// NextAction says, for an operator, what will happen to e next (seed 003's
// inspect output is the model): whether it is safe to retry and what runs it.
func NextAction(e Event, maxAttempts int, now time.Time) string {
	switch e.Status {
	case StatusReceived:
		return "waiting for a worker; forwarding is retry-safe (the target dedupes by event id)"
	case StatusProcessing:
		if e.ClaimedUntil != nil && e.ClaimedUntil.Before(now) {
			return "lease expired: the next worker takes it over (retry-safe, forward not confirmed)"
		}
		return "being forwarded by " + e.ClaimedBy
	case StatusFailed:
		return fmt.Sprintf("retry %s (attempt %d of %d), retry-safe, forward not confirmed", relative(e.NextAttemptAt, now), e.AttemptCount+1, maxAttempts)
	case StatusDeadLetter:
		return "none until replayed: jetrelay inbox replay " + e.EventID
	case StatusDone:
		return "none: forwarded; replay to forward it again"
	}
	return "unknown status " + string(e.Status)
}

// relative renders t against now the way an operator reads it: "in 12s",
// "expired 41s ago".
func relative(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d >= 0 {
		return "in " + d.String()
	}
	return (-d).String() + " ago"
}

// WriteInspect writes one event as the `inbox inspect` table.
func WriteInspect(w io.Writer, e Event, maxAttempts int, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	claimed := "-"
	if e.ClaimedUntil != nil {
		if e.ClaimedUntil.Before(now) {
			claimed = "expired " + relative(*e.ClaimedUntil, now)
		} else {
			claimed = e.ClaimedUntil.UTC().Format(time.RFC3339) + " (" + relative(*e.ClaimedUntil, now) + ")"
		}
	}
	processed := "-"
	if e.ProcessedAt != nil {
		processed = e.ProcessedAt.UTC().Format(time.RFC3339)
	}
	rows := [][2]string{
		{"event_id", e.EventID},
		{"event_type", e.EventType},
		{"status", string(e.Status)},
		{"attempt_count", fmt.Sprintf("%d of %d", e.AttemptCount, maxAttempts)},
		{"dedupe_key", e.EventID},
		{"received_at", e.ReceivedAt.UTC().Format(time.RFC3339)},
		{"claimed_by", orDash(e.ClaimedBy)},
		{"claimed_until", claimed},
		{"processed_at", processed},
		{"replays", fmt.Sprint(e.Replays)},
		{"body_bytes", fmt.Sprint(len(e.Body))},
		{"last_error", orDash(e.LastError)},
		{"next_action", NextAction(e, maxAttempts, now)},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// WriteList writes events as the `inbox list` table.
func WriteList(w io.Writer, events []Event, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT ID\tTYPE\tSTATUS\tATTEMPTS\tRECEIVED\tLAST ERROR")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", e.EventID, orDash(e.EventType), e.Status, e.AttemptCount,
			relative(e.ReceivedAt, now), orDash(truncate(e.LastError, 60)))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
