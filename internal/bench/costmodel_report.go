package bench

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// targetQueuedCPU is issue 22's bound on the `jetrelay run` process's CPU
// plus redis-server's per delivery of a preloaded backlog, in µs.
const targetQueuedCPU = 110.0

// costReport renders both runs: the outside figures, then the CPU per
// delivery of each step.
func costReport(o *costOptions, rounds, before outsideRounds, in *profiledDrain) *benchReport {
	var b strings.Builder
	out := rounds.median()
	fmt.Fprintf(&b, "### Outside figures (no profiler)\n\n")
	fmt.Fprintf(&b, "%d deliveries preloaded for %d subscription(s) (encrypted secrets, ~%d-byte events), then drained by `jetrelay run` "+
		"in its own process (embedded JetStream) to a receiver in the bench process, %d time(s), each on fresh servers; the figures are "+
		"the median drain's (%s of wall time). Every drain, `jetrelay run` + redis-server per delivery in the order they ran: %s.\n\n",
		out.n, o.subs, o.eventBytes, len(rounds), out.wall.Round(time.Millisecond), rounds)
	if len(before) > 0 {
		old := before.median()
		fmt.Fprintf(&b, "Before and after, in the same run: the baseline binary (`%s`) drained the same backlog before each of these drains, "+
			"alternating. Its median: **%.0f µs** (`jetrelay run` %.0f + redis-server %.0f), %.2f Redis commands per delivery; this binary's: **%.0f µs**, %.2f "+
			"(%+.0f %%). Every baseline drain: %s.",
			o.baselineBinary, old.perDelivery(), perDelivery(old.relayCPU, old.n), perDelivery(old.redisCPU, old.n), old.commandsPer(),
			out.perDelivery(), out.commandsPer(), 100*(out.perDelivery()/old.perDelivery()-1), before)
		if old.netIn >= 0 && out.netIn >= 0 {
			fmt.Fprintf(&b, " Bytes to redis-server per delivery, which the machine's load does not move: %.0f before, %.0f after; from it: %.0f and %.0f.",
				perCount(old.netIn, old.n), perCount(out.netIn, out.n), perCount(old.netOut, old.n), perCount(out.netOut, out.n))
		}
		b.WriteString("\n\n")
	}
	b.WriteString("| figure | per delivery | how |\n|---|---:|---|\n")
	fmt.Fprintf(&b, "| CPU of the `jetrelay run` process | %.0f µs | user + system from `/proc/<pid>/stat`, from its start to the last outcome |\n", perDelivery(out.relayCPU, out.n))
	fmt.Fprintf(&b, "| CPU of redis-server | %.0f µs | `/proc/<pid>/stat` (pid from INFO server), same window |\n", perDelivery(out.redisCPU, out.n))
	both := out.perDelivery()
	verdict := "**missed**"
	if both <= targetQueuedCPU {
		verdict = "**met**"
	}
	fmt.Fprintf(&b, "| **both** | **%.0f µs** | issue 22's target: ≤ %.0f µs, %s |\n", both, targetQueuedCPU, verdict)
	fmt.Fprintf(&b, "| Redis commands | %.2f | INFO commandstats delta (commands run inside scripts counted too; INFO itself left out): %s |\n",
		out.commandsPer(), commandBreakdown(out))
	inside, times := commandTimeBreakdown(out)
	fmt.Fprintf(&b, "| redis-server inside the commands sent | %.1f µs | INFO commandstats usec: %s. It is redis-server's wall clock around each "+
		"command, so on a busy machine it counts the time the server was descheduled too, and can exceed its CPU; SCAN is start-up's (retention's "+
		"first pass and the secrets check walk the keyspace once), not the deliveries' |\n", inside, times)
	fmt.Fprintf(&b, "| system calls of `jetrelay run` | %.2f writes, %.2f reads | `/proc/<pid>/io` syscw and syscr from its start: its POSTs, its JetStream "+
		"file store (a work item's record when stored and a tombstone when its ack removes it), Redis and log lines |\n",
		perCount(out.relaySys.writes, out.n), perCount(out.relaySys.reads, out.n))
	fmt.Fprintf(&b, "| system calls of redis-server | %.2f writes, %.2f reads | the same, in the window: one read per batch of requests that arrived together, "+
		"one write per batch of replies |\n", perCount(out.redisSys.writes, out.n), perCount(out.redisSys.reads, out.n))
	if out.netIn >= 0 {
		fmt.Fprintf(&b, "| bytes to and from redis-server | %.0f in, %.0f out | INFO stats total_net_input_bytes and total_net_output_bytes, the window's "+
			"(the bench's few INFO calls included): the commands with their arguments (a script call carries the records it compares and writes), "+
			"and the replies (the records read) |\n", perCount(out.netIn, out.n), perCount(out.netOut, out.n))
	}
	b.WriteString("\n")

	b.WriteString("Where the commands come from (the code, not this run): per batch, the bridge moves the ids with one script (one RPOP and one LPUSH " +
		"run inside it, and one LRANGE and one MGET that read the moved ids' delivery records, to name each delivery's subscription and event in its work item's headers), " +
		"and removes the published batch with one script (LRANGE and LTRIM inside it; LREM per id only when the batch is not the head of its " +
		"processing list), sent in the next move's round trip, ahead of it; per delivery, the engine reads the delivery, event, subscription, secret and settings with one MGET (GET delivery first " +
		"only for a work item without those headers), and the outcome is one compare-and-set (a GET and a SET inside a script), the outcomes of deliveries finishing together sharing one EVALSHA. The commands of concurrent " +
		"deliveries share round trips (go-redis's autopipeliner, pipelines, scripts), so commands per delivery are not round trips per delivery.\n\n")
	b.WriteString("This machine is shared (the sentence above says what else ran on it). These are CPU per delivery, far less sensitive " +
		"to load than rates, but contention still inflates them (cache misses, more scheduling, more GC while a drain takes longer), " +
		"and a virtual CPU's speed moves with its host's other guests, which need not show as steal: the same binary's drains " +
		"differ by up to a fifth within one run, so read differences under about 15 % between runs as noise and compare binaries " +
		"only in the alternating pairs above.\n\n")
	fmt.Fprintf(&b, "### Cost per step\n\n")
	fmt.Fprintf(&b, "The same drain with jetrelay in the bench process under a CPU profile (%d deliveries, %s, %.0f µs of the process's CPU per delivery, "+
		"receivers included). Each sample is given to the first step below with a function in its stack (so a step owns what it calls: the JSON "+
		"decoded inside a Redis read is JSON, the round trip is the read); a step's µs are its share of the samples × the process's CPU ÷ deliveries.\n\n",
		in.n, in.wall.Round(time.Millisecond), perDelivery(in.cpu, in.n))
	fmt.Fprintf(&b, "The Go heap in the same window (runtime/metrics, this process, receivers included): %s. "+
		"These counts move far less than CPU time with the machine's load (about 2 %% between runs, where CPU figures move by a fifth or more), "+
		"so they show a cut of several per cent that the CPU figures' spread hides (the receivers' share is the same in every run).\n\n", in.allocated())
	b.WriteString("| step | µs of CPU per delivery | share | the step alone (floor) | what it covers |\n|---|---:|---:|---:|---|\n")
	ps := in.profile
	perSample := float64(in.cpu.Microseconds()) / float64(max(ps.samples, 1)) / float64(max(in.n, 1))
	var jetrelay float64
	for _, s := range append(costSteps, costStep{name: stepOther, how: "unclaimed samples"}) {
		n := ps.components[s.name]
		us := float64(n) * perSample
		if s.name != stepReceiver {
			jetrelay += us
		}
		fl := ""
		if f, ok := in.floors[s.name]; ok && f.known() {
			fl = fmt.Sprintf("%.1f", f.us)
			if f.redisUS >= 0.05 {
				fl += fmt.Sprintf(" + redis %.1f", f.redisUS)
			}
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f %% | %s | %s |\n", s.name, us, 100*float64(n)/float64(max(ps.samples, 1)), fl, s.how)
	}
	fmt.Fprintf(&b, "| **jetrelay's side (receiver excluded)** | **%.0f** | | | in-process: no loopback TCP between jetrelay and its embedded server |\n\n", jetrelay)
	if len(in.floors) > 0 {
		b.WriteString("How each floor was measured (after the drain, on the same servers and records, one operation after another unless said otherwise; this process's CPU and, where it answers, redis-server's):\n\n")
		groups := map[string][]string{}
		var bound []string // the steps at their floor, with their µs in the drain
		var boundUS float64
		for _, k := range slices.Sorted(maps.Keys(in.floors)) {
			f := in.floors[k]
			if f.group != "" {
				groups[f.group] = append(groups[f.group], k)
				continue
			}
			samples := ps.components[k]
			if k != "Redis reads" && atFloor(float64(samples)*perSample, f.us, samples) {
				bound = append(bound, fmt.Sprintf("%s %.1f µs", k, float64(samples)*perSample))
				boundUS += float64(samples) * perSample
			}
			if k == "Redis reads" {
				// The drain's reads hand their commands to the autopipeliner
				// and parse what comes back: compare the whole, bounded above
				// by every autopipeliner round trip (the outcome scripts'
				// included) and the parsing alone.
				samples += ps.components["Redis round trips (autopipeliner)"]
			}
			drain := float64(samples) * perSample
			if k == "Redis reads" {
				drain += in.floors["JSON"].us
				fmt.Fprintf(&b, "- %s: %s. The drain's reads, their parsing and every autopipelined round trip together: %s\n", k, f.how, floorVerdict(drain, f.us, samples))
				continue
			}
			fmt.Fprintf(&b, "- %s: %s. %s\n", k, f.how, floorVerdict(drain, f.us, samples))
		}
		for _, g := range slices.Sorted(maps.Keys(groups)) {
			steps := groups[g]
			fmt.Fprintf(&b, "- %s: %s.", g, in.floors[steps[0]].how)
			var drain, alone float64
			for _, k := range steps {
				samples := ps.components[k]
				d := float64(samples) * perSample
				drain += d
				alone += in.floors[k].us
				if !in.floors[k].known() {
					fmt.Fprintf(&b, " %s: %d samples alone, too few to tell.", k, in.floors[k].samples)
					continue
				}
				fmt.Fprintf(&b, " %s: %s", k, floorVerdict(d, in.floors[k].us, samples))
				if atFloor(d, in.floors[k].us, samples) {
					bound = append(bound, fmt.Sprintf("%s %.1f µs", k, d))
					boundUS += d
				}
			}
			fmt.Fprintf(&b, " Together: %.1f µs in the drain, %.1f µs alone.\n", drain, alone)
		}
		b.WriteString("\n")
		if len(bound) == 0 {
			b.WriteString("No step was at its floor in this run: each is above or below it, or has too few samples to tell.\n\n")
		} else {
			fmt.Fprintf(&b, "At their floor in this run: %s; together %.0f µs of jetrelay's %.0f µs per delivery in this profile. "+
				"The other %.0f µs are in steps not shown at their floor (a floor is known to about ±√k samples, and may itself get cheaper); "+
				"redis-server's %.0f µs outside is its own.\n\n",
				strings.Join(bound, ", "), boundUS, jetrelay, jetrelay-boundUS, perDelivery(out.redisCPU, out.n))
		}
	}
	fmt.Fprintf(&b, "%d samples in all (100 Hz): a step of k samples is known to about ±√k samples, so a step under 5 µs is a rough figure. "+
		"The profiled drain has no loopback TCP between jetrelay and its embedded NATS and starts its clock with jetrelay's start, so it reads "+
		"a little below the outside figure. Hottest functions (self time):\n\n", ps.samples)
	b.WriteString(ps.table(12)[strings.Index(ps.table(12), "\n| hottest")+1:])

	summary := fmt.Sprintf("outside, median of %d drains (%s): jetrelay run %.0f µs + redis-server %.0f µs = %.0f µs of CPU per delivery; %.2f Redis commands per delivery (%s)\n",
		len(rounds), rounds, perDelivery(out.relayCPU, out.n), perDelivery(out.redisCPU, out.n), out.perDelivery(), out.commandsPer(), commandBreakdown(out))
	if len(before) > 0 {
		old := before.median()
		summary += fmt.Sprintf("baseline, median of %d drains (%s): %.0f µs; this binary %+.0f %%\n", len(before), before, old.perDelivery(), 100*(out.perDelivery()/old.perDelivery()-1))
	}
	summary += fmt.Sprintf("profiled: jetrelay's side %.0f µs per delivery; %s\n", jetrelay, in.allocated())
	return &benchReport{title: "jetrelay cost model", section: costModelSection, summary: summary + "\n" + b.String(), doc: b.String()}
}

// commandBreakdown lists the commands per delivery, most frequent first.
func commandBreakdown(out *outsideFigures) string {
	var parts []string
	for _, k := range sortedByCount(out.commands) {
		per := float64(out.commands[k]) / float64(max(out.n, 1))
		if per < 0.005 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(k), per))
	}
	return strings.Join(parts, ", ")
}

// scriptInner are the commands jetrelay's scripts run inside them on a
// drain's path; their time is in the scripts' usec already.
var scriptInner = []string{"get", "set", "rpop", "lpush", "lrange", "ltrim", "lrem"}

// commandTimeBreakdown is redis-server's time per delivery inside the
// commands clients sent (scripts' inner commands left out: their time is
// the script's), and each one's µs per call, most time first.
func commandTimeBreakdown(out *outsideFigures) (float64, string) {
	var total float64
	var parts []string
	keys := slices.Collect(maps.Keys(out.commandUsec))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(out.commandUsec[b], out.commandUsec[a]) })
	for _, k := range keys {
		if slices.Contains(scriptInner, k) {
			continue
		}
		total += float64(out.commandUsec[k]) / float64(max(out.n, 1))
		if per := float64(out.commands[k]) / float64(max(out.n, 1)); per >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.1f µs per call", strings.ToUpper(k), float64(out.commandUsec[k])/float64(out.commands[k])))
		}
	}
	parts = append(parts, "GET, SET, RPOP, LPUSH, LRANGE, LTRIM and LREM left out (on this path they run inside the scripts, whose time includes theirs)")
	return total, strings.Join(parts, ", ")
}

// perCount is n events over deliveries.
func perCount(n int64, deliveries int) float64 { return float64(n) / float64(max(deliveries, 1)) }

// atFloor reports whether a step that cost drain µs in the drain, from
// samples samples, is at the floor it costs alone: within half again of it
// either way (the profile's sampling error at these sample counts), from
// enough samples to tell.
func atFloor(drain, alone float64, samples int64) bool {
	return samples >= minFloorSamples && drain >= alone*0.67 && drain <= alone*1.5
}

// floorVerdict compares a step's cost in the drain with its cost alone.
// At its floor (atFloor); below it, the drain shares work the step alone
// repeats (batched round trips, cached secrets).
func floorVerdict(drain, alone float64, samples int64) string {
	switch {
	case samples < minFloorSamples:
		return fmt.Sprintf("In the drain %.1f µs from %d samples: too few to tell from its %.1f µs alone.", drain, samples, alone)
	case drain < alone*0.67:
		return fmt.Sprintf("In the drain %.1f µs: below the step alone (%.1f µs): the drain batches or caches it.", drain, alone)
	case atFloor(drain, alone, samples):
		return fmt.Sprintf("In the drain %.1f µs: **at its floor** (%.1f µs alone).", drain, alone)
	default:
		return fmt.Sprintf("In the drain %.1f µs: %.1f µs above the step alone.", drain, drain-alone)
	}
}
