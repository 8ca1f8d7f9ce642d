package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// targetBacklogRatio is issue 22's target: a healthy subscription's rate
// next to an equal bad backlog, to its rate alone.
const targetBacklogRatio = 0.90

func backlogReport(o *backlogOptions, rounds [][]*backlogCase) *benchReport {
	cases := medianRound(rounds)
	alone := cases[0]
	ratio := func(c *backlogCase) float64 {
		if alone.rate == 0 {
			return 0
		}
		return c.rate / alone.rate
	}
	complete := func(c *backlogCase) bool { return c.received >= o.deliveries }

	var rates strings.Builder
	rates.WriteString("| case | healthy deliveries received | start → last receipt | healthy rate (deliveries/s) | to alone | target |\n")
	rates.WriteString("|---|---:|---:|---:|---:|---|\n")
	// The verdicts are on each ratio's median over the rounds, every
	// round's drains complete.
	var verdicts []string
	oks := map[string]bool{}
	for k, bad := range []string{backlogBlackHole, backlogUnavail} {
		var each []float64
		ok := true
		for _, r := range rounds {
			each = append(each, backlogRatios(r)[k])
			ok = ok && complete(r[0]) && complete(r[k+1])
		}
		med := median(each)
		oks[bad] = ok && med >= targetBacklogRatio
		verdicts = append(verdicts, fmt.Sprintf("%s %s (median ratio %.3f over %d rounds)", caseTitle(bad), verdict(oks[bad]), med, len(rounds)))
	}
	// The floor's medians, by rate and by CPU: the best any way of
	// holding a bad endpoint's deliveries can do here.
	var floors, cpuFloors []float64
	for _, r := range rounds {
		floors, cpuFloors = append(floors, backlogRatios(r)[2]), append(cpuFloors, backlogCPURatios(r)[2])
	}
	floor, cpuFloor := median(floors), median(cpuFloors)
	for _, c := range cases {
		vs, target := "1 (reference)", ""
		switch c.bad {
		case backlogAlone:
		case backlogDone:
			vs, target = fmt.Sprintf("%.3f", ratio(c)), fmt.Sprintf("none: the two above if each of their bad deliveries became a work item (median %.3f)", floor)
		default:
			vs, target = fmt.Sprintf("%.3f", ratio(c)), fmt.Sprintf("≥ %.2f (median): %s", targetBacklogRatio, verdict(oks[c.bad]))
		}
		fmt.Fprintf(&rates, "| %s | %d / %d | %s | %.0f | %s | %s |\n", caseTitle(c.bad), c.received, o.deliveries, ms(c.drain), c.rate, vs, target)
	}

	var cost strings.Builder
	cost.WriteString("| case | requests the bad endpoint saw | its failed attempts | its put-offs (reason) | parked at intake (put back) | CPU per bad delivery, above alone | the engine's put-off path per put-off (profiled) | parks (this replica, all subscriptions; expired) | the healthy one's put-offs | process CPU per healthy delivery | redis-server CPU per healthy delivery |\n")
	cost.WriteString("|---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|\n")
	for k, c := range cases {
		sends, failed, putOffs, parked, perBad, path := "—", "—", "—", "—", "—", "—"
		if c.bad != backlogAlone {
			sends, failed, putOffs = fmt.Sprint(c.badSends), fmt.Sprint(c.badFailed), reasonList(c.badPutOffs)
			parked = fmt.Sprintf("%d (%d)", c.bridge.Parked, c.bridge.Unparked)
		}
		if d, ok := badCPU(cases, k, o.deliveries); ok && c.bad != backlogAlone {
			perBad = fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
		}
		if d, ok := putOffPathCPU(c); ok && c.bad != backlogAlone && c.bad != backlogDone {
			path = fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
		}
		fmt.Fprintf(&cost, "| %s | %s | %s | %s | %s | %s | %s | %d (%d) | %s | %.0f µs | %.0f µs |\n", caseTitle(c.bad), sends, failed, putOffs, parked, perBad, path,
			c.parks.Parks, c.parks.Expired, reasonList(c.healthyPutOffs), perDelivery(c.cpu, c.received), perDelivery(c.redisCPU, c.received))
	}
	// One bad delivery's CPU, median over the rounds, for each bad endpoint.
	var perBad []string
	for k, bad := range []string{backlogBlackHole, backlogUnavail} {
		var each []float64
		for _, r := range rounds {
			if d, ok := badCPU(r, k+1, o.deliveries); ok {
				each = append(each, float64(d)/float64(time.Microsecond))
			}
		}
		if len(each) > 0 {
			perBad = append(perBad, fmt.Sprintf("%.0f µs %s (%d parked, %s)", median(each), caseTitle(bad), cases[k+1].bridge.Parked, reasonList(cases[k+1].badPutOffs)))
		}
	}
	// The engine's own put-off path per put-off, median over the rounds.
	var perPath []string
	for k, bad := range []string{backlogBlackHole, backlogUnavail} {
		var each []float64
		for _, r := range rounds {
			if d, ok := putOffPathCPU(r[k+1]); ok {
				each = append(each, float64(d)/float64(time.Microsecond))
			}
		}
		if len(each) > 0 {
			perPath = append(perPath, fmt.Sprintf("%.1f µs %s (%.1f–%.1f)", median(each), caseTitle(bad), slices.Min(each), slices.Max(each)))
		}
	}

	s := alone.settings
	var doc strings.Builder
	fmt.Fprintf(&doc, "Issue 22's target: a healthy subscription draining its own backlog keeps at least %.0f %% of its rate alone "+
		"when an equal backlog for a bad subscription is interleaved with it. Each case runs on a fresh redis-server, "+
		"embedded JetStream and in-process jetrelay (`jetrelay run`'s defaults): %d deliveries are preloaded for one healthy "+
		"subscription (a receiver on 127.0.0.1 that verifies the signature and answers 200 at once), written as admin writes "+
		"them before jetrelay starts; beside a bad subscription, %d more for it, the two subscriptions' events alternating in "+
		"`dispatch:pending`. The bad endpoint is a **black hole** (accepts the connection, never answers: each send hangs for "+
		"the request timeout, %s) or answers **503** at once. The healthy rate is its deliveries over the time from "+
		"jetrelay's start to the receiver's last receipt (the bridge moving the whole backlog into JetStream included); "+
		"the case ends there, whatever the bad subscription still has queued.\n\n"+
		"The fourth case is the **floor** of the other two: its %d deliveries are already delivered (SUCCESS) when jetrelay "+
		"starts, as after a redrive of delivered ids, so each costs only what every work item costs before anything can be "+
		"decided about it: the bridge moves it, reads its record and publishes it, JetStream stores it, the engine fetches it, "+
		"reads it once and acks it. However the engine holds a bad endpoint's deliveries, once they are work items the healthy "+
		"rate beside them cannot be above the rate beside these, up to the noise of one short drain. Intake holds "+
		"(docs/isolation.md) keep most of them from becoming work items: once the bad subscription's breaker is open or its "+
		"sends hang, bridges park its new deliveries in Redis, so the two bad cases may go above this floor, and by how much "+
		"is what parking saves. On a shared machine one drain's rate swings with "+
		"whatever else runs, so each case also gives its ratio by CPU (alone's CPU per healthy delivery, this process's and "+
		"redis-server's, to the case's: the rate it keeps if the drain is bound by CPU, as on this machine), which is steadier.\n\n",
		targetBacklogRatio*100, o.deliveries, o.deliveries, s.requestTimeout, o.deliveries)
	var each []string
	for i, r := range rounds {
		q, c := backlogRatios(r), backlogCPURatios(r)
		each = append(each, fmt.Sprintf("round %d: %.0f/s alone, %.3f (by CPU %.3f) beside the black hole, %.3f (%.3f) beside the 503 endpoint, %.3f (%.3f) beside the floor",
			i+1, r[0].rate, q[0], c[0], q[1], c[1], q[2], c[2]))
	}
	fmt.Fprintf(&doc, "The scenario runs %d rounds of the four cases in turn; the verdicts are on each ratio's median over the rounds, and the tables show the round whose two ratios have the median sum. Every round: %s.\n\n",
		len(rounds), strings.Join(each, "; "))
	doc.WriteString(rates.String())
	fmt.Fprintf(&doc, "\nResult: %s. The floor (deliveries that need nothing but their intake): median ratio %.3f, by CPU %.3f", strings.Join(verdicts, "; "), floor, cpuFloor)
	if floor < targetBacklogRatio && cpuFloor < targetBacklogRatio {
		fmt.Fprintf(&doc, ", both below %.2f: what every work item costs before anything can be decided about it (its move out of Redis, its store in "+
			"JetStream, its fetch, read and ack) is already more than the target leaves a bad delivery, so on this machine only deliveries that never "+
			"become work items (parked at intake) can reach the target; those the bridges move before the hold is written (within a breaker's "+
			"threshold of failures, or the 200 ms a hanging subscription takes to count as stalled, plus the bridges' 25 ms refresh) still cost "+
			"their intake (the cost model in BENCHMARKS.md has those steps)", targetBacklogRatio)
	}
	doc.WriteString(".\n\n")
	doc.WriteString("What the bad subscription cost during the healthy drain: requests its endpoint saw (the black hole's are its " +
		"connections, each holding one unanswered request), attempts logged as failed, put-offs logged by reason; parked at intake " +
		"is how many of its deliveries the bridge left in Redis under the subscription's intake hold (and put back within the case: " +
		"probes, and those due); parks are " +
		"deliveries held in memory for a subscription at its in-flight limit, counted for the whole replica (the healthy one's " +
		"included), and expired ones were handed back after 5 s parked, to be put off if still refused; the healthy subscription's own put-offs are those of its " +
		"backlog meeting its own in-flight limit. CPU is this process's (jetrelay, its NATS server, the receivers) and " +
		"redis-server's over the drain, divided by the healthy deliveries.\n\n")
	doc.WriteString(cost.String())
	if len(perBad) > 0 {
		fmt.Fprintf(&doc, "\nOne bad delivery, median over the rounds: %s. It is the case's CPU (this process's and redis-server's) above "+
			"alone's, divided by the bad subscription's %d deliveries, whether parked at intake (a share of the bridge's move and "+
			"one script call) or put off (its intake, its decision and its wake-up or held copy), its endpoint's few sends "+
			"included. Beside it, the intake of one work item, the floor's CPU above alone's per item it "+
			"added: %s.\n", strings.Join(perBad, "; "), o.deliveries, intakeCPU(rounds, o.deliveries))
	}
	if len(perPath) > 0 {
		fmt.Fprintf(&doc, "\nThe engine's own put-off path, median over the rounds (lowest–highest): %s. It is the share of each case's "+
			"CPU profile whose stack is in the engine's put-off functions (deciding the wait or hold, the record's wait note, the "+
			"wake-up or held copy's publish and the wait for its PubAck, whatever they call), times this process's CPU, over the "+
			"case's put-offs. It leaves out JetStream storing the messages and redis-server running the scripts, which the figure "+
			"above includes, but it does not subtract one drain's CPU from another's, so a shared machine's noise moves it far less.\n",
			strings.Join(perPath, "; "))
	}
	fmt.Fprintf(&doc, "\nEngine settings: %s, MaxAckPending %d, breaker after %d consecutive failed attempts for %s (doubling up to %s), "+
		"waits longer than %s as JetStream message schedules, connect timeout %s, request timeout %s.\n",
		s.pool(), s.maxAckPending, s.breakerThreshold, s.breakerOpen, s.breakerMaxOpen, s.parkAfter, s.connectTimeout, s.requestTimeout)

	title := "## " + backlogSection + "\n\n"
	return &benchReport{
		title:   "jetrelay " + strings.ToLower(backlogSection),
		section: backlogSection,
		summary: title + rates.String() + "\n" + cost.String(),
		doc:     doc.String(),
	}
}

// intakeCPU is the median over the rounds of one work item's intake:
// the floor's CPU (this process's and redis-server's) above the alone
// case's, divided by the n work items the floor added.
func intakeCPU(rounds [][]*backlogCase, n int) string {
	var each []float64
	for _, r := range rounds {
		alone, floor := r[0], r[len(r)-1]
		if n > 0 && alone.received == floor.received {
			each = append(each, float64(floor.cpu+floor.redisCPU-alone.cpu-alone.redisCPU)/float64(n)/float64(time.Microsecond))
		}
	}
	if len(each) == 0 {
		return "not measured (a drain incomplete)"
	}
	return fmt.Sprintf("%.0f µs", median(each))
}

// median is the middle value of xs (the lower middle one for an even
// count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
