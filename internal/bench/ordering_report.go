package bench

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// orderingReport writes the "Cost, measured" section of docs/ordering.md.
func orderingReport(o *orderingOptions, r *orderingResults) *benchReport {
	var d strings.Builder
	d.WriteString("Every figure below comes from one run of the command above; timings on a shared machine are noisy " +
		"(the machine's sentence above says what else ran on it), Redis command counts are not. \"First enqueue\" is the start of admin's first `Emit`; " +
		"latency runs from the moment admin sent the delivery's enqueue script to the receipt (docs/BENCHMARKS.md says how).\n\n")
	d.WriteString("| case | delivered / expected | deliveries/s, first enqueue → last outcome | steady deliveries/s, first → last receipt | wall per delivery (steady) | CPU per delivery (process) | latency p50 / p99 |\n")
	d.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
	for _, c := range []*perfResult{r.roundTrip, r.firstAttempt, r.strict, r.alone, r.beside} {
		fmt.Fprintf(&d, "| %s | %d / %d | %.0f | %.0f | %s | %.0f µs | %s / %s |\n", c.title, c.succeeded, c.expected, c.throughput, c.steady(),
			perItem(c), perDelivery(c.cpu, c.succeeded), ms(c.p50), ms(c.p99))
	}
	d.WriteString("\n")

	slowest := r.firstAttempt
	if r.strict.steady() < slowest.steady() {
		slowest = r.strict
	}
	item, rt := time.Duration(float64(time.Second)/max(slowest.steady(), 1e-9)), r.roundTrip.p50
	fmt.Fprintf(&d, "- **One ordered subscription, fast receiver** (target ≥ %d/s): first-attempt %.0f/s, strict %.0f/s, steady (between the receiver's first and last receipt) — %s. "+
		"Counted from the first enqueue the rates are %.0f/s and %.0f/s: a line is found by a scan once a second, and the case is short. "+
		"With one send in flight for the subscription, each delivery waits for the one before it: %s per delivery (the slower mode), "+
		"of which the POST's round trip to the receiver is %s (p50 of one sender posting back to back with jetrelay's own HTTP client, no queue). "+
		"The remaining %s is jetrelay's own work per item, done one after the other: the line consumer's hand-out once the previous item is acked, "+
		"the Redis reads of the delivery, event, subscription and secret, signing, the Redis write of the outcome and the ack. "+
		"A receiver taking 50 ms allows about 20/s, as upstream's global lease does for the whole fleet.\n",
		targetOrderedRate, r.firstAttempt.steady(), r.strict.steady(), verdict(min(r.firstAttempt.steady(), r.strict.steady()) >= targetOrderedRate),
		r.firstAttempt.throughput, r.strict.throughput, us(item), us(rt), us(max(0, item-rt)))
	ratio := r.beside.throughput / max(r.alone.throughput, 1e-9)
	var each []string
	for _, p := range r.pairs {
		each = append(each, fmt.Sprintf("%.0f/s alone, %.0f/s beside: %s %% (put off alone: %s; beside: %s)",
			p.alone.throughput, p.beside.throughput, percentDown(p.ratio()), p.alone.waits(), p.beside.waits()))
	}
	fmt.Fprintf(&d, "- **Unordered subscriptions beside %d busy ordered ones** (target ≥ %.0f %% of alone, on the median of %d alone/beside pairs measured in turn): "+
		"%.0f/s alone, %.0f/s beside them: %s %% — %s. Every pair, in order: %s. "+
		"Busy lines (the median pair): %s. Their items take a worker each while in flight, and each replica scans for lines once a second.\n",
		r.besideLines.lines, 100*targetBesideLines, len(r.pairs), r.alone.throughput, r.beside.throughput, percentDown(ratio), verdict(ratio >= targetBesideLines),
		strings.Join(each, "; "), r.beside.note)
	if !(r.besideLines.busyAtEnd >= r.besideLines.lines) {
		fmt.Fprintf(&d, "  Not every line held work to the end (%d of %d): raise --line-backlog.\n", r.besideLines.busyAtEnd, r.besideLines.lines)
	}
	fmt.Fprintf(&d, "- **Ordering off** (every subscription `none`, `JETRELAY_ORDERING=none`): the performance scenario's fast case, %d deliveries to %d subscriptions, %.0f/s in this run.",
		r.alone.expected, o.perf.subs, r.alone.throughput)
	if r.thisDrain == nil {
		d.WriteString(" (No baseline binary was given: --baseline-binary compares the Redis commands per delivery with a build from before ordered delivery.)\n")
	} else {
		this, old := r.thisDrain, r.oldDrain
		fmt.Fprintf(&d, " Redis commands per delivery (INFO commandstats over a drain of %d preloaded deliveries by `jetrelay run` in its own process, "+
			"commands inside scripts counted): **%.3f** for this build, %.3f for main just before ordered delivery (git %s). ",
			this.n, this.commandsPer(), old.commandsPer(), defaultBaselineRev)
		if diffs := commandsDiff(this, old); len(diffs) > 0 {
			fmt.Fprintf(&d, "Per delivery, this build runs %s (other changes merged since that revision count too). ", strings.Join(diffs, ", "))
		} else {
			d.WriteString("No command differs by 0.005 per delivery or more. ")
		}
		fmt.Fprintf(&d, "The only command ordering adds with ordering off is the bridge's `HGETALL jetrelay:ordering` once a second: %d in this drain of %s, %.4f per delivery (the baseline: %d). "+
			"Nothing is read per item: the bridge routes from the delivery records it reads anyway. "+
			"The same drains' throughput: %.0f/s this build, %.0f/s the baseline (wall clock; noisy).\n",
			this.commands["hgetall"], this.wall.Round(100*time.Millisecond), float64(this.commands["hgetall"])/float64(max(this.n, 1)), old.commands["hgetall"],
			float64(this.n)/this.wall.Seconds(), float64(old.n)/old.wall.Seconds())
	}
	d.WriteString(orderingFailingCost)

	summary := fmt.Sprintf("ordered, fast receiver: first-attempt %.0f/s, strict %.0f/s steady (round trip %s); unordered beside %d lines: %s %% of alone (%.0f/s vs %.0f/s; median of %d pairs)",
		r.firstAttempt.steady(), r.strict.steady(), us(rt), r.besideLines.lines, percentDown(ratio), r.beside.throughput, r.alone.throughput, len(r.pairs))
	if r.thisDrain != nil {
		summary += fmt.Sprintf("; Redis commands per delivery, ordering off: %.3f (baseline %.3f)", r.thisDrain.commandsPer(), r.oldDrain.commandsPer())
	}
	return &benchReport{title: "Ordered delivery: cost", summary: summary, doc: d.String(), section: orderingSection}
}

// orderingFailingCost is what a failing receiver costs its own line; it
// is the retry policy's, not measured.
const orderingFailingCost = `- A failing receiver in ` + "`strict`" + ` mode holds its line for each retry wait
  (1 s, 2 s, 4 s… with the default policy); in ` + "`first-attempt`" + ` mode only for
  the send itself.
`

func perItem(r *perfResult) string {
	if r.steady() <= 0 {
		return "—"
	}
	return us(time.Duration(float64(time.Second) / r.steady()))
}

// steady is the rate between the receiver's first and last receipt, or
// the case's throughput where that was not measured.
func (r *perfResult) steady() float64 {
	if r.receiptRate > 0 {
		return r.receiptRate
	}
	return r.throughput
}

func us(d time.Duration) string {
	if d >= 10*time.Millisecond {
		return ms(d)
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

// percentDown writes a ratio as a percentage with one decimal, rounded
// down, so a figure shown as 90.0 % never stands for a ratio below 0.90.
func percentDown(ratio float64) string {
	return fmt.Sprintf("%.1f", math.Floor(1000*ratio)/10)
}
