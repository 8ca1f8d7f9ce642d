package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// The isolation targets of issue 3.
const (
	targetThroughputRatio = 0.90
	targetP99Millis       = 250
)

func isolationReport(o *isolationOptions, a, b *phaseResult) *benchReport {
	ratio := 0.0
	if a.healthy.throughput > 0 {
		ratio = b.healthy.throughput / a.healthy.throughput
	}
	tputOK := ratio >= targetThroughputRatio && b.healthy.complete
	p99OK := b.healthy.p99.Milliseconds() < targetP99Millis && b.healthy.complete

	var t strings.Builder
	fmt.Fprintf(&t, "| healthy subscriptions (%d, %.0f deliveries/s for %s) | A: alone | B: next to the bad ones | B vs A | target |\n", o.healthySubs, o.rate, o.duration)
	t.WriteString("|---|---:|---:|---:|---|\n")
	row := func(what, va, vb, cmp, target string) {
		fmt.Fprintf(&t, "| %s | %s | %s | %s | %s |\n", what, va, vb, cmp, target)
	}
	row("deliveries SUCCESS / expected", fmt.Sprintf("%d / %d", a.healthy.succeeded, a.healthy.expected), fmt.Sprintf("%d / %d", b.healthy.succeeded, b.healthy.expected), "", "all")
	row("throughput (deliveries/s, first Emit → last SUCCESS)", fmt.Sprintf("%.1f", a.healthy.throughput), fmt.Sprintf("%.1f", b.healthy.throughput),
		fmt.Sprintf("%.3f", ratio), fmt.Sprintf("≥ %.2f: %s", targetThroughputRatio, verdict(tputOK)))
	row("latency p50 (enqueue → receipt)", ms(a.healthy.p50), ms(b.healthy.p50), "", "")
	row("latency p95", ms(a.healthy.p95), ms(b.healthy.p95), "", "")
	row("latency p99", ms(a.healthy.p99), ms(b.healthy.p99), "", fmt.Sprintf("< %d ms: %s", targetP99Millis, verdict(p99OK)))
	row("latency max", ms(a.healthy.max), ms(b.healthy.max), "", "")
	row("load generator's worst lag behind schedule", ms(a.healthy.emitLag), ms(b.healthy.emitLag), "", "")
	row("process CPU time / wall time (jetrelay + NATS + receivers + load)", cpuLine(a), cpuLine(b), "", "")
	row("process peak RSS (VmHWM) / peak Go heap in use", memLine(a), memLine(b), "", "")
	row("waiting in JetStream at the end (scheduled / held) / Go heap in use after GC", waitingLine(a), waitingLine(b), perWaiting(a, b), "")
	row("redis-server CPU time", ms(a.redisCPU), ms(b.redisCPU), "", "")
	row("peak JetStream ack-pending (of MaxAckPending)", fmt.Sprintf("%d / %d", a.peakAckPending, a.settings.maxAckPending),
		fmt.Sprintf("%d / %d", b.peakAckPending, b.settings.maxAckPending), "", "")

	var bad strings.Builder
	bad.WriteString("| bad subscription | endpoint | deliveries queued | sends recorded (attempts) | failed attempts | what the endpoint saw | SUCCESS / FAILED / RETRYING / PENDING | waiting in JetStream now | parked put-offs (reason) | subscription at the end |\n")
	bad.WriteString("|---|---|---:|---:|---:|---|---|---:|---|---|\n")
	for _, r := range b.bad {
		fmt.Fprintf(&bad, "| %s | %s | %d | %d | %d | %s | %d / %d / %d / %d | %d | %s | %s |\n",
			r.name, r.behaviour, r.queued, r.sends, r.failedAttempts, r.endpointSaw,
			r.byStatus[proto.DeliverySuccess], r.byStatus[proto.DeliveryFailed], r.byStatus[proto.DeliveryRetrying], r.byStatus[proto.DeliveryPending],
			r.parkedNow, reasonList(r.parkedPutOffs), r.subStatus)
	}

	s := b.settings
	settings := fmt.Sprintf("Engine settings (`jetrelay run`'s defaults unless a JETRELAY_* variable was set): %s, "+
		"adaptive per-subscription in-flight limits bounded by %d, breaker opens after %d consecutive failed attempts for %s (doubling up to %s), "+
		"retry waits longer than %s and every put-off as JetStream message schedules, MaxAckPending %d, AckWait %s, connect timeout %s, request timeout %s.",
		s.pool(), s.maxInFlight, s.breakerThreshold, s.breakerOpen, s.breakerMaxOpen, s.parkAfter, s.maxAckPending, s.ackWait, s.connectTimeout, s.requestTimeout)

	summary := "## Healthy subscriptions\n\n" + t.String() + "\n## Bad subscriptions (phase B)\n\n" + bad.String() + "\n" + settings + "\n" + warningLines(a, b)

	var doc strings.Builder
	fmt.Fprintf(&doc, "## What is measured\n\n"+
		"Two phases, each on a fresh redis-server (AOF off), a fresh embedded JetStream and one in-process jetrelay "+
		"(bridge + engine, built exactly as `jetrelay run` builds them). Deliveries are written as cycles-server-admin "+
		"writes them (`Emit`: SAVE_EVENT_LUA, then SAVE_AND_ENQUEUE_ONCE_LUA and LPUSH dispatch:pending per matching subscription).\n\n"+
		"- **Phase A:** %d healthy subscriptions, each with its own HTTP receiver on 127.0.0.1 that verifies the signature "+
		"and answers 200 at once, receive a fixed-rate stream of %.0f deliveries/s (one event every %s, fanned out to all of them) for %s.\n"+
		"- **Phase B:** the same stream, next to three bad subscriptions created with admin's defaults (retry policy 5 retries from 1 s doubling, "+
		"auto-disable after 10 failed deliveries): a **dead** endpoint (a closed port: connection refused), a **black hole** "+
		"(accepts the connection, never answers) and a **slow** endpoint (answers 200 after %s). %d deliveries are queued to each: "+
		"%.0f %% before the healthy stream starts, as fast as admin can write them, the rest spread over the stream.\n\n"+
		"Throughput is the healthy subscriptions' SUCCESS records per second, from the start of admin's first `Emit` to the last `completed_at`; "+
		"latency is enqueue → receipt: from the moment admin sent the delivery's SAVE_AND_ENQUEUE_ONCE_LUA (which writes its record and pushes its id "+
		"onto dispatch:pending) to the receiver's receipt of the request. Each healthy event goes to every healthy subscription, whose deliveries admin enqueues "+
		"one after another: each delivery's latency starts at its own enqueue. Earlier runs of this document measured it from the moment `Emit` began "+
		"(admin's event save, subscription reads and the enqueues before the delivery's included), then from the event's first enqueue. "+
		"Throughput cannot exceed the offered rate, so the ratio says whether the healthy subscriptions kept up, and the latency "+
		"whether they waited behind the bad ones.\n\n",
		o.healthySubs, o.rate, ms(o.healthyEvery()), o.duration, o.slowDelay, o.badDeliveries, o.before*100)
	fmt.Fprintf(&doc, "## Result\n\n%s\n%s\n", verdictLine(tputOK, p99OK, ratio, b), summary)
	fmt.Fprintf(&doc, "## Where the work stood during phase B\n\nSampled every second from the start of the healthy stream (every %s row shown).\n\n%s\n",
		"second", timelineTable(b.timeline, 2, b.streamStart, b.healthy.received))
	doc.WriteString(isolationMechanisms)
	return &benchReport{title: "Isolation benchmark: one dead, one black-holed and one slow endpoint next to healthy subscriptions", summary: summary, doc: doc.String()}
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func verdictLine(tputOK, p99OK bool, ratio float64, b *phaseResult) string {
	if tputOK && p99OK {
		return fmt.Sprintf("Both targets are met: next to the bad subscriptions the healthy ones kept %.1f %% of their throughput and their p99 latency was %s.\n",
			ratio*100, ms(b.healthy.p99))
	}
	var missed []string
	if !b.healthy.complete {
		missed = append(missed, fmt.Sprintf("only %d of %d healthy deliveries reached SUCCESS within the settle time", b.healthy.succeeded, b.healthy.expected))
	}
	if !tputOK {
		missed = append(missed, fmt.Sprintf("throughput kept %.1f %% (target ≥ %.0f %%)", ratio*100, targetThroughputRatio*100))
	}
	if !p99OK {
		missed = append(missed, fmt.Sprintf("p99 latency %s (target < %d ms)", ms(b.healthy.p99), targetP99Millis))
	}
	return "Target missed: " + strings.Join(missed, "; ") + ".\n"
}

func cpuLine(p *phaseResult) string {
	return fmt.Sprintf("%s / %s (%.0f %% of one CPU)", ms(p.cpu), ms(p.wall), 100*p.cpu.Seconds()/p.wall.Seconds())
}

func memLine(p *phaseResult) string {
	rss := fmt.Sprintf("%.0f MiB", float64(p.peakRSS)/(1<<20))
	if p.peakRSSLife {
		rss += " (process lifetime)"
	}
	return fmt.Sprintf("%s / %.0f MiB", rss, float64(p.heapPeak)/(1<<20))
}

func waitingLine(p *phaseResult) string {
	return fmt.Sprintf("%d / %d / %.0f MiB", p.waiting.Scheduled, p.waiting.Held, float64(p.heapWaiting)/(1<<20))
}

// perWaiting is the heap phase B holds beyond phase A per waiting delivery.
func perWaiting(a, b *phaseResult) string {
	n := int64(b.waiting.Scheduled+b.waiting.Held) - int64(a.waiting.Scheduled+a.waiting.Held)
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f KiB per waiting delivery", float64(int64(b.heapWaiting)-int64(a.heapWaiting))/float64(n)/1024)
}

func reasonList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

// warningLines lists jetrelay's own warnings and errors (those that name no
// subscription): a healthy run has none.
func warningLines(a, b *phaseResult) string {
	var out strings.Builder
	for _, p := range []struct {
		name string
		w    map[string]int
	}{{"A", a.warnings}, {"B", b.warnings}} {
		for _, msg := range slices.Sorted(maps.Keys(p.w)) {
			fmt.Fprintf(&out, "\nPhase %s logged %d× %q.", p.name, p.w[msg], msg)
		}
	}
	if out.Len() > 0 {
		out.WriteString("\n")
	}
	return out.String()
}

// healthyEvery is the interval between two healthy events.
func (o *isolationOptions) healthyEvery() time.Duration {
	return time.Duration(float64(time.Second) * float64(o.healthySubs) / o.rate)
}
