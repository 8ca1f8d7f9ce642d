package soak

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// checkNames describe each check in the report, in the order shown.
var checkNames = []struct{ check, what string }{
	{CheckTerminal, "every delivery is final, or still held for a subscription that is not ACTIVE"},
	{CheckLost, "no delivery is neither final nor queued anywhere"},
	{CheckReceipt, "SUCCESS only with a signed 2xx receipt of its event at the receiver"},
	{CheckFailedEvidence, "FAILED only with a send of its own (attempts ≥ 1) or a named refusal"},
	{CheckOnePlace, "never queued in two places at once (Redis lists, ZSET, work items, wake-ups, held)"},
	{CheckConsecutive, "consecutive_failures never past disable_after_failures (sampled every 250 ms)"},
	{CheckDuplicates, "duplicate 2xx receipts within the sends in flight around the faults"},
	{CheckSignature, "every request's X-Cycles-Signature verifies"},
	{CheckHandback, "handback works within seconds of every process stopping and leaves every open delivery in Redis"},
	{CheckRecord, "every delivery record readable"},
	{CheckShutdown, "SIGTERM stops a jetrelay process within JETRELAY_DRAIN_TIMEOUT and a margin"},
}

// WriteMarkdown renders a run's report as docs/reliability.md: the run,
// the faults by kind, the deliveries, each check, and what jetrelay
// promises next to the reference service and JetStream.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	b.WriteString("# Reliability: the fault soak\n\n")
	fmt.Fprintf(&b, "Rendered by `go tool task soak -- --seed %d --duration %s --report docs/reliability.md` on %s.\n"+
		"The same seed draws the same faults, endpoint behaviour and pacing (`internal/soak`).\n\n",
		r.Seed, r.Duration, time.Now().UTC().Format("2006-01-02"))
	switch {
	case !r.Checked:
		b.WriteString("**Verdict: none.** The run stopped before its deliveries were checked.\n\n")
	case r.OK():
		b.WriteString("**Verdict: every check held.**\n\n")
	default:
		var failed []string
		for _, v := range r.Violations {
			failed = append(failed, fmt.Sprintf("`%s` ×%d", v.Check, v.Count))
		}
		fmt.Fprintf(&b, "**Verdict: violations found** (%s); see Checks below. A run of a build with every fix of issue 21 replaces this one.\n\n", strings.Join(failed, ", "))
	}
	b.WriteString(`## What runs

- **NATS**: three real ` + "`nats-server`" + ` processes (the version go.mod pins), clustered, JetStream file storage; the dispatch stream is R3.
- **Redis**: a real ` + "`redis-server`" + ` with ` + "`appendonly yes`" + ` and ` + "`appendfsync always`" + `, restarted on the same directory after each SIGKILL.
- **jetrelay on the cluster** (Redis database 0, four subscriptions): ` + "`replica-1`" + ` (bridge and engine), ` + "`replica-2`" + ` (engine), ` + "`bridge`" + ` (bridge only).
- **jetrelay on its embedded server** (Redis database 1, two subscriptions): ` + "`embedded`" + `.
- **Load**: events written exactly as admin writes them (` + "`internal/admin`" + `, the writer of ` + "`jetrelay events emit`" + `), at a steady rate; each fans out to every subscription.
- **Receivers**: a real HTTP server on loopback; each subscription's endpoint verifies ` + "`X-Cycles-Signature`" + ` (` + "`transport/receive`" + `) and, period by period as the seed draws it, answers 200, 500 or 503, answers slowly (half within a second, half after the sender's 2 s timeout) or black-holes the connection. A receipt is a signed 2xx answered to a sender that was still waiting.
- **Faults**, one after the other every 1–3 s: SIGKILL, SIGTERM and SIGSTOP (longer than AckWait) of replicas, SIGKILL and SIGTERM of the bridge and of the embedded process, SIGKILL of redis-server, restarts and SIGKILL of nats-server nodes, SIGKILL of the stream's leader (found with the JetStream API), subscriptions paused, resumed, disabled and re-enabled (admin's write), operator requeues (` + "`jetrelay deliveries requeue --status FAILED --subscription`" + `), and in the middle of the run, after every endpoint answered 503 for 4 s, a rollback: every jetrelay stopped, ` + "`jetrelay handback`" + ` on both keyspaces, a check that every open delivery is in the reference's Redis keys, and a switch-over (jetrelay started again).
- **Settlement**: the faults stop, redis-server is started again if it is down and the soak waits until Redis answers, every endpoint answers 200, every subscription is set ACTIVE, and the soak waits (with a deadline) until every delivery is final. Then every delivery is checked.

`)
	b.WriteString("## The run\n\n| | |\n|---|---|\n")
	row(&b, "seed", fmt.Sprint(r.Seed))
	row(&b, "fault phase", r.Duration.String())
	row(&b, "settled in", r.Settled.Round(time.Second).String())
	row(&b, "faults injected", fmt.Sprint(r.FaultCount()))
	row(&b, "deliveries", fmt.Sprint(r.Deliveries))
	row(&b, "emits that failed (Redis down)", fmt.Sprint(r.EmitErrors))
	b.WriteString("\n## Faults by kind\n\n| fault | injected |\n|---|---:|\n")
	for _, k := range slices.Sorted(maps.Keys(r.Faults)) {
		fmt.Fprintf(&b, "| %s | %d |\n", k, r.Faults[k])
	}
	b.WriteString("\n## Deliveries\n\n| | |\n|---|---:|\n")
	row(&b, "deliveries", fmt.Sprint(r.Deliveries))
	row(&b, "SUCCESS (each with a signed 2xx receipt)", fmt.Sprint(r.Success))
	row(&b, "FAILED after sends of their own", fmt.Sprint(r.Failed-r.FailedRefused-r.WronglyFailed))
	row(&b, "FAILED by a named refusal", fmt.Sprint(r.FailedRefused))
	row(&b, "held for a subscription not ACTIVE", fmt.Sprint(r.Held))
	row(&b, "**lost**", fmt.Sprint(r.Lost))
	row(&b, "**stranded**", fmt.Sprint(r.Stranded))
	row(&b, "**wrongly failed**", fmt.Sprint(r.WronglyFailed))
	row(&b, "FAILED although the receiver answered 2xx (the answer was lost to a fault)", fmt.Sprint(r.FailedReceived))
	row(&b, "requests at the receivers", fmt.Sprint(r.Requests))
	row(&b, "duplicate 2xx receipts", fmt.Sprintf("%d (%.2f %% of deliveries; bound: %d sends in flight around the faults)", r.Duplicates, 100*r.DuplicateRate(), r.DuplicateBound))
	row(&b, "highest consecutive_failures seen", fmt.Sprint(r.MaxConsecutive))
	row(&b, "subscriptions re-enabled while settling", fmt.Sprint(r.Reenabled))
	for _, h := range r.HandbackResults {
		row(&b, "handback", strings.ReplaceAll(h, "|", "\\|"))
	}
	b.WriteString("\n## Checks\n\n| check | what must hold | result |\n|---|---|---|\n")
	for _, c := range checkNames {
		result := "held"
		if !r.Checked {
			result = "not checked"
		}
		for _, v := range r.Violations {
			if v.Check == c.check {
				result = fmt.Sprintf("**violated ×%d**: %s (%s)", v.Count, strings.ReplaceAll(v.Detail, "|", "\\|"), strings.Join(v.IDs, ", "))
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c.check, c.what, result)
	}
	b.WriteString(promises)
	_, err := io.WriteString(w, b.String())
	return err
}

func row(b *strings.Builder, k, v string) { fmt.Fprintf(b, "| %s | %s |\n", k, v) }

// promises is the closing section of docs/reliability.md.
const promises = `
## What jetrelay promises, next to the reference service and JetStream

| | reference events service (cycles-server-events) | JetStream alone | jetrelay |
|---|---|---|---|
| a crash mid-delivery | lost until 0.1.25.18 (` + "`BRPOP`" + `); since then ` + "`BLMOVE`" + ` to one ` + "`dispatch:processing`" + ` list and recovery at startup | a message not acked within AckWait is redelivered | every hop is acknowledged after the next one holds the id: the bridge removes an id from Redis after the PubAck, the engine acks after the outcome is in Redis; nothing is lost, at most the sends in flight are repeated |
| a retry waiting | a ` + "`dispatch:retry`" + ` ZSET polled every 5 s; a crash between the record and the ` + "`ZADD`" + ` left it stuck RETRYING until 0.1.25.24 | a delayed nak or a message schedule, replicated with the stream | the retry is a nak or a message schedule in the R3 stream; the record is written first, the wait second, and a wait that fires early waits again |
| an endpoint that is down | every delivery is sent ` + "`max_retries`" + ` + 1 times, then FAILED; 10 FAILED in a row disable the subscription | — | a breaker holds deliveries while the endpoint is down without using their attempts; a delivery is never FAILED on evidence that is not its own: every FAILED delivery of an ACTIVE subscription had a send of its own, or a named refusal (SSRF, secret, ownership boundary, stale, inactive) |
| two copies of one delivery | one dispatcher per instance; several instances may both hold one id after a recovery | at-least-once: a redelivery can meet a slow first copy | duplicates are collapsed by the delivery's status and ` + "`Nats-Msg-Id`" + `; two copies settle the work the same way, never by an ack that deletes the other's retry; the receiver's ` + "`X-Cycles-Event-Id`" + ` dedupe covers the sends in flight at a crash |
| a paused or disabled subscription | its deliveries are FAILED "Subscription not active" | — | held in the stream and sent once it is ACTIVE again (or FAILED at the stale cutoff); ` + "`JETRELAY_INACTIVE_SUBSCRIPTIONS=fail`" + ` keeps the reference's behaviour |
| a delivery nowhere | stays PENDING or RETRYING for ever | — | a reconciler in the bridge finds deliveries neither final nor queued and puts them back |
| rollback | — | — | ` + "`jetrelay handback`" + ` returns every open delivery to ` + "`dispatch:pending`" + ` / ` + "`dispatch:retry`" + ` once every process is stopped |
| duplicates | a crash between the send and the record sends again | redelivery after AckWait | as the reference, bounded by the sends in flight at a fault; measured above |

jetrelay promises at-least-once delivery end to end, like both: a receiver must deduplicate by ` + "`X-Cycles-Event-Id`" + ` (` + "`transport/receive`" + ` does). What it adds is that no fault of the list above loses, strands or wrongly fails a delivery; this run is the evidence.
`
