package bench

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/queue"
)

// The performance targets of issue 6 (2-core machine, 1 KB events), with
// issue 22's: a third of the ceiling end to end (issue 6 asked for half, for
// the fast receiver only) with one subscription and ten, embedded and over
// TCP, and a tighter p99 at 1,000/s (5 ms; issue 6 asked for 10 ms).
const (
	targetCeilingShare = 0.33 // of the ceiling: ceilingCases
	targetFastRatio    = 10   // × the sequential reference, fast receiver
	targetSlowRatio    = 100  // × the sequential reference, 50 ms receiver
	targetLoneShare    = 0.90 // one subscription, of the same case's throughput with --subs subscriptions (issue 14)
	targetP99At1000    = 5 * time.Millisecond
	targetRSSPerReplic = 150_000_000 // bytes: 150 MB (143 MiB)
)

// ceilingCases are the cases issue 22 holds to targetCeilingShare: the fast
// receiver with ten subscriptions and with one, embedded, and one replica
// whose NATS is over TCP, each measured as the issue measured it: a
// preloaded backlog drained by `jetrelay run` in its own process. live is
// the same shape while admin's writers run in this process, reported
// beside it: those writers take a share of the same CPUs (in production
// admin runs elsewhere), so the live ratio is the lower one.
var ceilingCases = []struct{ id, live, what string }{
	{"drain", "fast", "the fast receiver"},
	{"drain-1", "fast-1", "the fast receiver, 1 subscription"},
	{"drain-tcp", "replicas-1", "the fast receiver, NATS over TCP"},
}

// perfTarget is one target's verdict and, when missed, the evidence.
type perfTarget struct {
	what, measured string
	met            bool
	reported       bool          // no target: a figure shown beside one; met says it completed
	bound          string        // when missed: what bounds it
	profileOf      *perfResult   // when missed: the case whose profile is shown
	evidence       []*perfResult // further cases the bound refers to
}

func perfReport(b *benchContext, o *perfOptions, results []*perfResult) *benchReport {
	byID := func(id string) *perfResult {
		for _, r := range results {
			if r.id == id {
				return r
			}
		}
		return nil
	}
	ceiling, refFast, refSlow := byID("ceiling"), byID("reference-fast"), byID("reference-slow")

	var t strings.Builder
	t.WriteString("| # | case | delivered / expected | throughput (/s) | vs ceiling | vs reference | latency p50 / p95 / p99 (max) | CPU: process + redis-server (cores) | CPU per delivery | peak RSS |\n")
	t.WriteString("|---:|---|---:|---:|---:|---:|---|---|---:|---:|\n")
	for i, r := range results {
		vsCeiling, vsRef := "", ""
		if ceiling != nil && ceiling.throughput > 0 && r.kind == kindJetrelay {
			vsCeiling = fmt.Sprintf("%.0f %%", 100*r.throughput/ceiling.throughput)
		}
		if ref := referenceFor(r, o, refFast, refSlow); ref != nil && ref.throughput > 0 && r.kind == kindJetrelay {
			vsRef = fmt.Sprintf("%.0f×", r.throughput/ref.throughput)
		}
		lat := "—"
		if r.latency {
			lat = fmt.Sprintf("%s / %s / %s (%s)", ms(r.p50), ms(r.p95), ms(r.p99), ms(r.max))
		}
		rss := fmt.Sprintf("%.0f MiB", float64(r.peakRSS)/(1<<20))
		if r.rssLifetime {
			rss += " (lifetime)"
		}
		if r.child {
			rss += " (jetrelay process)"
		}
		fmt.Fprintf(&t, "| %d | %s | %d / %d | %.0f | %s | %s | %s | %.2f + %.2f | %.0f µs | %s |\n", i+1, r.title, r.succeeded, r.expected, r.throughput,
			vsCeiling, vsRef, lat, r.cores(), r.redisCores(), costPer(r), rss)
	}

	targets := perfTargets(o, results, byID)
	var tt strings.Builder
	tt.WriteString("| target | measured | verdict |\n|---|---|---|\n")
	for _, tg := range targets {
		fmt.Fprintf(&tt, "| %s | %s | %s |\n", tg.what, tg.measured, tg.verdict())
	}
	summary := "## Results\n\n" + t.String() + "\n## Targets\n\n" + tt.String()

	rep := &benchReport{title: "jetrelay performance: throughput, latency and memory against the POST ceiling and the reference algorithm", summary: summary}
	var doc strings.Builder
	doc.WriteString(perfMethod(o, results))
	doc.WriteString(summary)
	doc.WriteString(caseNotes(results))

	if chart := chartPath(b.out, o.chart); chart != "" && len(results) > 0 {
		bars := make([]chartBar, len(results))
		for i, r := range results {
			bars[i] = chartBar{value: r.throughput, kind: r.kind}
		}
		png, top := throughputChart(bars)
		rep.files = map[string][]byte{chart: png}
		rel, err := filepath.Rel(filepath.Dir(b.out), chart)
		if err != nil {
			rel = chart
		}
		fmt.Fprintf(&doc, "\n## Chart\n\n![throughput of each case, log scale](%s)\n\n"+
			"Throughput of each case, one bar per row of the results table in the same order (#1 at the top), on a log scale from 1/s at the left edge "+
			"to %.0f/s at the right; the dark vertical lines are powers of ten, the faint ones 2× and 5×. "+
			"Blue: the POST ceiling; grey: the sequential reference loop; green: jetrelay.\n", filepath.ToSlash(rel), top)
	}

	var missed []perfTarget
	for _, tg := range targets {
		if !tg.met {
			missed = append(missed, tg)
		}
	}
	if len(missed) > 0 {
		doc.WriteString("\n## Targets missed, and what bounds them\n\n")
		shown := map[*perfResult]bool{} // a case's profile is shown once, under its first missed target
		for _, tg := range missed {
			fmt.Fprintf(&doc, "### %s\n\nMeasured %s. **Bound:** %s\n\n", tg.what, tg.measured, tg.bound)
			switch p := tg.profileOf; {
			case p == nil || p.profile == nil:
			case shown[p]:
				fmt.Fprintf(&doc, "CPU profile of case \"%s\": above.\n\n", p.title)
			default:
				shown[p] = true
				fmt.Fprintf(&doc, "CPU profile of case \"%s\" (this process: jetrelay, the embedded NATS, the sink and admin's writer; redis-server is a separate process):\n\n%s\n",
					p.title, p.profile.table(12))
			}
		}
	}
	heading := "\n## Profiles of every case\n\n"
	for _, r := range results {
		if r.profile == nil {
			continue
		}
		doc.WriteString(heading)
		heading = ""
		fmt.Fprintf(&doc, "<details><summary>%s</summary>\n\n%s\n</details>\n\n", r.title, r.profile.table(10))
	}
	rep.doc = doc.String()
	return rep
}

// referenceFor is the reference measured against the same receiver as r.
// verdict is the target's table cell.
func (tg perfTarget) verdict() string {
	switch {
	case tg.reported && tg.met:
		return "reported"
	case tg.reported:
		return "**incomplete**"
	}
	return verdict(tg.met)
}

func referenceFor(r *perfResult, o *perfOptions, fast, slow *perfResult) *perfResult {
	if r.id == "slow" || r.id == "slow-1" || r.id == "slow-sized" {
		return slow
	}
	if r.id == "fanout" || r.id == "queued" || r.id == "rate" {
		return nil // different shapes; the fast and slow cases carry the comparison
	}
	return fast
}

func perfTargets(o *perfOptions, results []*perfResult, byID func(string) *perfResult) []perfTarget {
	var out []perfTarget
	ceiling, fast, refFast, refSlow := byID("ceiling"), byID("fast"), byID("reference-fast"), byID("reference-slow")
	for _, c := range ceilingCases {
		r, live := byID(c.id), byID(c.live)
		if ceiling == nil || ceiling.throughput <= 0 {
			continue
		}
		if r != nil {
			share := r.throughput / ceiling.throughput
			out = append(out, perfTarget{
				what:     fmt.Sprintf("end-to-end throughput with %s ≥ %.0f %% of the ceiling (preloaded backlog, `jetrelay run` in its own process)", c.what, targetCeilingShare*100),
				measured: fmt.Sprintf("%.0f/s of %.0f/s = %.0f %%", r.throughput, ceiling.throughput, share*100),
				met:      share >= targetCeilingShare && r.succeeded == r.expected, profileOf: live,
				bound: cpuBound(r) + fmt.Sprintf(" A bare POST (the ceiling) costs %.0f µs of CPU, both ends; end to end, each delivery cost %.0f µs (jetrelay and the receivers %.0f, redis-server %.0f), so the whole machine tops out near %.0f/s = %.0f %% of the ceiling. "+
					"The profile shown is the same shape's live case (jetrelay in this process); docs/BENCHMARKS.md's cost model splits the cost by step.",
					costPer(ceiling), costPer(r), perDelivery(r.cpu, r.succeeded), perDelivery(r.redisCPU, r.succeeded),
					float64(runtime.NumCPU())*1e6/costPer(r), 100*float64(runtime.NumCPU())*1e6/costPer(r)/ceiling.throughput),
			})
		}
		if live != nil {
			share := live.throughput / ceiling.throughput
			out = append(out, perfTarget{
				what:     fmt.Sprintf("end-to-end throughput with %s while admin writes in this process (reported; the target is judged on the preloaded drain)", c.what),
				measured: fmt.Sprintf("%.0f/s of %.0f/s = %.0f %%", live.throughput, ceiling.throughput, share*100),
				met:      live.succeeded == live.expected, reported: true, profileOf: live,
				bound: "not every delivery arrived within the settle time",
			})
		}
	}
	if d := byID("drain"); d != nil && refFast != nil && refFast.throughput > 0 {
		// Both sides drain a preloaded backlog: the reference's deliveries
		// are queued before it starts too.
		ratio := d.throughput / refFast.throughput
		out = append(out, perfTarget{
			what:     fmt.Sprintf("≥ %d× the sequential reference, fast receiver (both draining a preloaded backlog)", targetFastRatio),
			measured: fmt.Sprintf("%.0f/s vs %.0f/s = %.1f×", d.throughput, refFast.throughput, ratio),
			met:      ratio >= targetFastRatio, profileOf: fast,
			bound: fmt.Sprintf("the reference loop is cheap here, not jetrelay slow: on loopback each of its ten Redis round trips and its POST take tens of µs, "+
				"so one loop delivers %.0f/s using %.2f + %.2f cores (%.0f µs of CPU per delivery, jetrelay needs %.0f). With 2 CPUs, no design can be 10× a loop "+
				"that already uses over half the machine; the ratio grows with the round-trip time (a Redis or receiver 1 ms away caps the loop near 1/(10 ms) = 100/s, see the 50 ms rows). ",
				refFast.throughput, refFast.cores(), refFast.redisCores(), costPer(refFast), costPer(d)) + cpuBound(d),
		})
	}
	if fast != nil && refFast != nil && refFast.throughput > 0 {
		out = append(out, perfTarget{
			what:     "the fast receiver while admin writes in this process, against the sequential reference (reported; the target is judged on the preloaded drain)",
			measured: fmt.Sprintf("%.0f/s vs %.0f/s = %.1f×", fast.throughput, refFast.throughput, fast.throughput/refFast.throughput),
			met:      fast.succeeded == fast.expected, reported: true, profileOf: fast,
			bound: "not every delivery arrived within the settle time",
		})
	}
	out = append(out, loneTargets(o, byID)...)
	for _, id := range []string{"slow", "slow-sized"} {
		slow := byID(id)
		if slow == nil || refSlow == nil || refSlow.throughput <= 0 {
			continue
		}
		ratio := slow.throughput / refSlow.throughput
		limit := float64(slow.workers) / o.slowDelay.Seconds()
		bound := cpuBound(slow)
		if slow.throughput >= 0.75*limit {
			bound = fmt.Sprintf("concurrency, not CPU: %d workers each hold a send for the receiver's %s, so at most %d / %s = %.0f deliveries/s "+
				"(Little's law); measured %.0f/s, %.0f %% of that, with %.2f + %.2f cores busy. docs/operations.md sizes JETRELAY_WORKERS at rate × latency for this reason.",
				slow.workers, o.slowDelay, slow.workers, o.slowDelay, limit, slow.throughput, 100*slow.throughput/limit, slow.cores(), slow.redisCores())
		}
		out = append(out, perfTarget{
			what:     fmt.Sprintf("≥ %d× the sequential reference, receiver taking %s (%s)", targetSlowRatio, o.slowDelay, slow.pool()),
			measured: fmt.Sprintf("%.0f/s vs %.1f/s = %.0f×", slow.throughput, refSlow.throughput, ratio),
			met:      ratio >= targetSlowRatio, profileOf: slow, bound: bound,
		})
	}
	for _, r := range results {
		if r.id != "rate" {
			continue
		}
		rate := rateOf(r, o)
		if rate == 1000 {
			out = append(out, perfTarget{
				what: fmt.Sprintf("p99 enqueue → receipt at 1,000 deliveries/s ≤ %s", ms(targetP99At1000)),
				measured: fmt.Sprintf("p99 %s (p50 %s, p95 %s); from the start of admin's Emit, as earlier runs measured it: p99 %s (p50 %s)",
					ms(r.p99), ms(r.p50), ms(r.p95), ms(r.emitP99), ms(r.emitP50)),
				met: r.p99 <= targetP99At1000 && r.succeeded == r.expected, profileOf: r,
				bound: fmt.Sprintf("latency, not throughput: at 1,000/s the machine is %.0f %% busy (%.2f + %.2f cores); the tail is the time a delivery waits between the hops "+
					"(admin's LPUSH → the bridge's move → JetStream → the engine's pull → Redis reads → POST) while the CPUs are shared by everything. "+
					"At this rate each delivery costs %.0f µs of CPU (process + redis-server), against %s when draining a backlog: most of it is fixed per-wake-up work "+
					"(the bridge's and the engine's loops waking for one or two ids at a time); see the profile (the bridge's share).%s%s",
					100*busy(r), r.cores(), r.redisCores(), costPer(r), costLine(byID("queued")), loadGeneratorShare(r), hopWaits(r)) + cpuWaitBound(r),
			})
		} else {
			out = append(out, perfTarget{what: fmt.Sprintf("p99 enqueue → receipt at %.0f/s (reported, no target)", rate),
				measured: fmt.Sprintf("p99 %s (p50 %s, p95 %s)", ms(r.p99), ms(r.p50), ms(r.p95)), met: r.succeeded == r.expected, reported: true,
				bound: "not every delivery arrived within the settle time", profileOf: r})
		}
	}
	if q := byID("queued"); q != nil {
		out = append(out, perfTarget{
			what: fmt.Sprintf("peak RSS with %d deliveries queued ≤ %d MB (%.0f MiB) per replica", o.queued, targetRSSPerReplic/1_000_000, float64(targetRSSPerReplic)/(1<<20)),
			measured: fmt.Sprintf("%.0f MiB%s: the peak RSS (VmHWM) of one replica, `jetrelay run` as a separate process with its embedded JetStream, "+
				"started after the %d deliveries were queued and measured until the receivers had them all (drained at %.0f/s)",
				float64(q.peakRSS)/(1<<20), rssSplit(q), o.queued, q.throughput),
			met: q.peakRSS <= targetRSSPerReplic && !q.rssLifetime && q.succeeded == q.expected, profileOf: q,
			bound: rssBound(o.queued),
		})
	}
	return out
}

func rateOf(r *perfResult, o *perfOptions) float64 {
	var rate float64
	_, _ = fmt.Sscanf(r.title, "fixed rate %g/s", &rate)
	return rate
}

// cpuBound names CPU as the bound when the machine was nearly saturated,
// with the profile's biggest consumers as the evidence.
func cpuBound(r *perfResult) string {
	b := busy(r)
	if b < 0.85 {
		return fmt.Sprintf("not CPU alone: the machine was %.0f %% busy (%.2f cores in this process, %.2f in redis-server, of %d); see the profile for where the time went.",
			b*100, r.cores(), r.redisCores(), runtime.NumCPU())
	}
	s := fmt.Sprintf("CPU: the machine's %d CPUs were %.0f %% busy (%.2f cores in this process, %.2f in redis-server).", runtime.NumCPU(), b*100, r.cores(), r.redisCores())
	if r.profile != nil {
		var parts []string
		for i, k := range sortedByCount(r.profile.components) {
			if i == 5 {
				break
			}
			parts = append(parts, fmt.Sprintf("%s %.0f %%", k, 100*r.profile.share(k)))
		}
		s += " In this process: " + strings.Join(parts, ", ") + "."
	}
	return s
}

// busy is the share of the machine's CPUs this process and redis-server used.
func busy(r *perfResult) float64 {
	return (r.cores() + r.redisCores()) / float64(runtime.NumCPU())
}

// costPer is the CPU (this process and redis-server) per delivery, in µs.
func costPer(r *perfResult) float64 {
	if r == nil {
		return 0
	}
	return perDelivery(r.cpu+r.redisCPU, r.succeeded)
}

// costLine describes jetrelay's own cost per delivery, measured while it
// drained a backlog with no load generator running.
func costLine(q *perfResult) string {
	if q == nil {
		return "(unmeasured: the queued case did not run)"
	}
	return fmt.Sprintf("%.0f µs (the queued case, no writers running: %.0f/s with %.0f %% of the machine busy)", costPer(q), q.throughput, 100*busy(q))
}

// costCeiling is how close to the ceiling jetrelay's own cost lets it get
// at best: the whole machine divided by its CPU per delivery.
func costCeiling(q, ceiling *perfResult) string {
	if q == nil || costPer(q) == 0 || ceiling == nil || ceiling.throughput == 0 {
		return ""
	}
	best := float64(runtime.NumCPU()) * 1e6 / costPer(q)
	return fmt.Sprintf("jetrelay's own cost is %s, so even with the whole machine and no writers it tops out near %.0f/s = %.0f %% of the ceiling: "+
		"the pipeline (bridge move + publish + delete, JetStream store and ack, the engine's pipelined Redis reads, JSON parsing, the outcome write) costs %.1f× a bare POST. "+
		"That is the bound; the profile shows its parts.", costLine(q), best, 100*best/ceiling.throughput, costPer(q)/costPer(ceiling))
}

func perDelivery(cpu time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(n)
}

func chartPath(out, flagValue string) string {
	switch {
	case flagValue != "":
		return flagValue
	case out == "":
		return ""
	default:
		return strings.TrimSuffix(out, filepath.Ext(out)) + ".png"
	}
}

func perfMethod(o *perfOptions, results []*perfResult) string {
	size := 0
	for _, r := range results {
		size = max(size, r.eventBytes)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Run it with `go tool task bench` (the command above, which starts its own redis-server and needs nothing else). "+
		"Each case runs on a fresh redis-server (AOF off), a fresh embedded JetStream (file storage) and jetrelay built exactly as `jetrelay run` builds it, "+
		"with `run`'s defaults (%s) unless the case says otherwise; it runs in this process, except in the preloaded-backlog and queued cases (below). Deliveries are written as cycles-server-admin writes them "+
		"(`Emit`: SAVE_EVENT_LUA, then SAVE_AND_ENQUEUE_ONCE_LUA and LPUSH dispatch:pending per matching subscription), by %d concurrent writers in this process, whose commands share round trips through go-redis's autopipeliner (admin's own cost is not jetrelay's: it runs elsewhere in production; "+
		"the fixed-rate cases use %d writers on plain connections instead, so no batching wait is added to the latency); "+
		"signing secrets are stored encrypted (`enc:`), so every send decrypts one. Events are %d bytes as stored. "+
		"The receivers are HTTP servers on 127.0.0.1 in this process that verify every signature (a request that fails is answered 401 and never counted).\n\n",
		engineDefaults(), o.emitters, o.rateEmitters, size)
	b.WriteString("- **Throughput** is delivered deliveries per second from the start of admin's first `Emit` to the last `completed_at` of a SUCCESS record. " +
		"It cannot exceed the rate admin writes at, which is also shown in the notes below.\n" +
		"- **Latency** is enqueue → receipt: from the moment admin sent the delivery's SAVE_AND_ENQUEUE_ONCE_LUA (the script that writes a delivery record and pushes its id onto dispatch:pending; its own round trip is counted) " +
		"to the receiver's receipt of the request. Admin's work before it (saving the event and reading the subscriptions: four round trips under the same load; " +
		"where an event goes to several subscriptions, the enqueues of the deliveries before it, which admin sends one after another) is admin's, not the dispatcher's. " +
		"Every emitting case's note, and the 1,000/s target, also give the latency from the moment `Emit` began, as earlier runs of this document measured it.\n" +
		"- **CPU** is this process's CPU time (jetrelay, the embedded NATS, the receivers and admin's writers together) and redis-server's, each divided by the wall time of the case: " +
		fmt.Sprintf("%d cores is the whole machine.\n", runtime.NumCPU()) +
		"- **Peak RSS** is this process's VmHWM during the case, reset at its start (after returning freed memory to the OS); it includes the embedded NATS server and the receivers.\n\n")
	if slices.ContainsFunc(results, func(r *perfResult) bool { return r.child }) {
		fmt.Fprintf(&b, "The preloaded-backlog cases and the queued case measure one replica as an operator runs it: after admin has written all their deliveries (%d in the queued case), the bench starts `jetrelay run` "+
			"(this binary, or the one --relay-binary names) as a separate process, with its embedded JetStream (file storage in the case's temporary directory; "+
			"in the NATS-over-TCP case a JetStream server in this process instead, which it reaches over loopback TCP, its CPU then this process's), the same settings, "+
			"its management server off and log level warn. Its **peak RSS** is that process's VmHWM (`/proc/<pid>/status`) over its whole life, which begins with the case, "+
			"so nothing of the bench (receivers, admin's writer, the load generator's ids and times) is in it. Its **CPU** is that process's user + system time "+
			"(`/proc/<pid>/stat`) plus this process's (the receivers'; no writer runs then); its throughput is measured from the moment the process is started, "+
			"so it includes the process's start-up. No CPU profile or Go heap figure is taken of it. "+
			"Issue 22 measured its ceiling share this way (admin runs elsewhere in production, so its writers do not share jetrelay's CPUs), "+
			"so the ≥ 33 %% target is judged on the preloaded-backlog cases; the same shapes with admin writing in this process are reported beside them.\n\n", o.queued)
	}
	b.WriteString("The two references run in the same process against the same receivers:\n\n" +
		"- **Ceiling:** the engine's own HTTP client (the `transport/webhook` instance `run` builds, SSRF guard included; connections kept alive, " +
		"`MaxIdleConnsPerHost` = workers) POSTing signed events back to back from as many goroutines as the engine has workers, with no queue, no Redis and no JetStream. Its latency is the request round trip.\n" +
		"- **Reference:** the Cycles events service's dispatch algorithm (contract §6) as a Go loop, one delivery at a time: `BRPOP dispatch:pending`, `GET delivery`, `GET event`, " +
		"`GET webhook`, `GET webhook:secret` and decrypt, POST with the same client, `TTL` + `SET delivery`, `GET` + `SET webhook` (consecutive_failures, last_triggered_at, last_success_at). " +
		"Its deliveries are queued before it starts, so its rate excludes admin's writes, and it leaves out the reference service's 1 ms `fixedDelay` between deliveries: both favour the reference.\n\n")
	b.WriteString("What one delivery costs jetrelay, and what has been taken out of it: the bridge moves ids in Lua batches (while `dispatch:pending` is all but empty, waiting for an id and moving whatever else came share one round trip) and publishes them asynchronously; " +
		"the engine reads the delivery, then its event, subscription and secret, and writes the outcome with one compare-and-set script, all through go-redis's " +
		"autopipeliner, so that what the workers issue at the same moment shares one write and one read (`JETRELAY_REDIS_AUTOPIPELINE`); records are decoded with " +
		"goccy/go-json, a subscription only when its stored bytes change, and the outcome patch is applied in one pass; one goroutine keeps every slow send's work item alive. " +
		"Acks are not batched: with explicit acks and deliveries finishing out of order there is no safe batch form (AckAll would also ack items still in flight), " +
		"and the NATS client already coalesces the workers' ack publishes into shared socket writes.\n\n")
	return b.String()
}

func engineDefaults() string {
	return fmt.Sprintf("an elastic worker pool of %d to %d workers, MaxAckPending %d, adaptive per-subscription in-flight limits with no bound but the workers", engine.DefaultMinWorkers, engine.DefaultWorkers, queue.DefaultMaxAckPending)
}

// caseNotes says what each case did beyond its title.
func caseNotes(results []*perfResult) string {
	var b strings.Builder
	b.WriteString("\n### What each case did\n\n")
	for i, r := range results {
		fmt.Fprintf(&b, "%d. **%s**: %s × %d replica(s); measured over %s", i+1, r.title, r.pool(), r.replicas, ms(r.span))
		if r.enqueueRate > 0 {
			fmt.Fprintf(&b, "; admin wrote %.0f deliveries/s", r.enqueueRate)
		}
		if r.emitLag > 0 {
			fmt.Fprintf(&b, "; the writers' worst lag behind the fixed schedule was %s", ms(r.emitLag))
		}
		if r.latency && r.emitP99 > 0 {
			fmt.Fprintf(&b, "; from the moment `Emit` began (admin's event save and subscription reads included): p50 %s, p99 %s", ms(r.emitP50), ms(r.emitP99))
		}
		if r.redisReads >= 0 && r.succeeded > 0 && r.kind == kindJetrelay {
			fmt.Fprintf(&b, "; redis-server processed %.2f reads per delivery (INFO stats total_reads_processed: one per round trip of any client, %s)",
				float64(r.redisReads)/float64(r.succeeded), readsWhose(r))
		}
		if r.sendWaits != nil && r.sendWaits.queue.n() > 0 {
			fmt.Fprintf(&b, "; the time before each send, as jetrelay measures it (%s, quantiles estimated from its buckets as histogram_quantile does): %s", sendWaitSeries, r.sendWaits.line())
		}
		if r.note != "" {
			b.WriteString("; " + r.note)
		}
		b.WriteString(".\n")
	}
	return b.String()
}

// readsWhose says whose round trips a case's Redis reads count.
func readsWhose(r *perfResult) string {
	if r.child {
		return "jetrelay's alone: admin wrote the backlog before the window"
	}
	return "admin's writes included"
}

// loneTargets compare one busy subscription with the same load spread over
// --subs subscriptions: with adaptive in-flight limits a lone subscription
// may use the whole pool, so it must not be much slower.
func loneTargets(o *perfOptions, byID func(string) *perfResult) []perfTarget {
	var out []perfTarget
	for _, c := range []struct{ lone, many, receiver string }{
		{"drain-1", "drain", "the fast receiver (preloaded backlog)"},
		{"fast-1", "fast", "the fast receiver"},
		{"slow-1", "slow", fmt.Sprintf("a receiver taking %s", o.slowDelay)},
	} {
		lone, many := byID(c.lone), byID(c.many)
		if lone == nil || many == nil || many.throughput <= 0 {
			continue
		}
		share := lone.throughput / many.throughput
		little := float64(lone.workers) / max(o.slowDelay.Seconds(), 1e-9)
		bound := cpuBound(lone)
		if c.lone == "slow-1" {
			bound = fmt.Sprintf("Little's law: %d workers each holding a send for %s allow at most %.0f/s; the lone subscription got %.0f/s, %.0f %% of that. ",
				lone.workers, o.slowDelay, little, lone.throughput, 100*lone.throughput/little) + bound
		}
		out = append(out, perfTarget{
			what:     fmt.Sprintf("one subscription with %s ≥ %.0f %% of the throughput of %d subscriptions", c.receiver, targetLoneShare*100, o.subs),
			measured: fmt.Sprintf("%.0f/s vs %.0f/s = %.0f %%", lone.throughput, many.throughput, share*100),
			met:      share >= targetLoneShare && lone.succeeded == lone.expected, profileOf: lone,
			bound: bound + " The subscription's in-flight limit adapts (docs/operations.md); JETRELAY_MAX_IN_FLIGHT_PER_SUBSCRIPTION bounds it.",
		})
	}
	return out
}

// rssSplit says how much of a separate process's peak RSS is its
// binary's pages, "" when /proc did not tell.
func rssSplit(q *perfResult) string {
	if q.rssFile <= 0 || q.rssFile >= q.peakRSS {
		return ""
	}
	return fmt.Sprintf(" (%.0f MiB of it file-backed: the pages of the jetrelay binary, its code and read-only data, that the kernel mapped in as they ran, "+
		"RssFile at the end, the same whatever is queued; at least %.0f MiB the heap and the runtime's)", float64(q.rssFile)/(1<<20), float64(q.peakRSS-q.rssFile)/(1<<20))
}

// rssBound says what the queued case's peak RSS is made of.
func rssBound(queued int) string {
	return fmt.Sprintf("memory of the jetrelay process alone (the receivers, admin's writer and the bench's bookkeeping run in the bench process and are not in it). "+
		"Besides the binary's pages, it holds the embedded JetStream server's caches of the 4 MiB stream blocks it reads and writes, its index of the %d queued messages "+
		"and the ids it remembers for the 2-minute dedupe window, the engine's messages in flight (up to MaxAckPending), and the Go runtime's headroom above the "+
		"live heap (GOGC: up to as much again)", queued)
}

// pool says how many workers a case ran with: an elastic pool's floor and
// cap, or a fixed count.
func (r *perfResult) pool() string {
	if r.minWorkers > 0 && r.minWorkers < r.workers {
		return fmt.Sprintf("a pool of %d to %d workers", r.minWorkers, r.workers)
	}
	return fmt.Sprintf("%d workers", r.workers)
}

// loadGeneratorShare says how much of a case's process CPU admin's
// simulated writes took, from its profile: CPU the machine's other work
// competes with here, which in production runs elsewhere.
func loadGeneratorShare(r *perfResult) string {
	if r.profile == nil || r.profile.samples == 0 {
		return ""
	}
	n := r.profile.components["load generator (admin writes)"]
	if n == 0 {
		return ""
	}
	share := float64(n) / float64(r.profile.samples)
	return fmt.Sprintf(" Admin's simulated writes, which run elsewhere in production, took %.0f %% of this process's samples (about %.2f cores) and their scripts a share of redis-server's.",
		100*share, share*r.cores())
}

// cpuWaitBound says, for the latency target, how long the run's
// processes were runnable but waiting for a CPU, as the kernel counts it;
// "" when it was not read.
func cpuWaitBound(r *perfResult) string {
	w := r.cpuWaits()
	if w == "" {
		return ""
	}
	return " Waiting for a CPU while runnable (/proc/<pid>/task/*/schedstat, summed over threads): " + w +
		". Each wake-up on a delivery's way (a goroutine woken by its socket, redis-server by a command) waits that per-slice time on average, and longer in the tail, " +
		"for one of the CPUs the load generator, the receiver, JetStream, the engine and redis-server share here; a delivery crosses about a dozen of them."
}

// hopWaits names, for the latency target, the two hops jetrelay times
// itself (jetrelay_send_wait_seconds), "" when it was not read.
func hopWaits(r *perfResult) string {
	if r.sendWaits == nil || r.sendWaits.queue.n() == 0 {
		return ""
	}
	return fmt.Sprintf(" Of the hops, as the engine times them (%s): %s; the rest of each delivery's latency is admin's enqueue, the bridge's move and publish, and the POST.",
		sendWaitSeries, r.sendWaits.line())
}
