package bench

import (
	"io"
	"maps"
	"slices"
	"testing"
	"time"
)

// maxCommandsPerDelivery is what one delivery of a preloaded backlog may
// cost in Redis commands, those run inside scripts included, as the cost
// model counts them (INFO commandstats): the engine's one MGET of the
// delivery and its records, its outcome's compare-and-set (a GET and a SET
// inside a script call that the outcomes finishing together share), and
// the bridge's per-batch move, read and removal shared by the batch, plus
// room for the background (heartbeats, scans) of a short run. It was 7.0
// before the bridge named each delivery's records in its work item and
// moved and removed batches with a few commands each, and 4.06 before
// outcomes shared their script calls.
const maxCommandsPerDelivery = 3.6

// A delivery of a preloaded backlog costs the Redis commands the cost
// model publishes, and no more: a command added to the hot path (a second
// read, a write outside the outcome script, a per-id list operation in the
// bridge) fails here rather than only in the next benchmark run.
func TestCostModel_ADeliveryCostsAtMostThreeRedisCommandsAndAFraction(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server, an embedded JetStream and jetrelay")
	}
	ctx := t.Context()
	// A fixed pool of 64 workers over 16 subscriptions stays far below
	// each subscription's first in-flight limit (16): almost every
	// handling is a first send, the case counted here.
	settings := map[string]string{"JETRELAY_WORKERS": "64", "JETRELAY_MIN_WORKERS": "64"}
	b := &benchContext{progress: io.Discard, verbose: io.Discard, getenv: func(k string) string { return settings[k] }}
	o := &costOptions{deliveries: 2000, subs: 16, emitters: 16, eventBytes: 1024, settle: time.Minute}
	env, f, _, err := costEnv(ctx, b, o, "")
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	c0, err := commandStats(ctx, env.adminDB)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.start(ctx); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := awaitDrained(ctx, env, f, o.deliveries, o.settle); err != nil {
		t.Fatal(err)
	}
	drain := time.Since(started)
	parks := env.stack.Engine().ParkStats().Parks
	ledger := int64(env.stack.Engine().SuccessWrites())
	c1, err := settledCommandStats(ctx, env.adminDB)
	if err != nil {
		t.Fatal(err)
	}
	out := &outsideFigures{n: o.deliveries, commands: map[string]int64{}}
	for k, v := range c1 {
		if d := v - c0[k]; d > 0 && k != "info" {
			out.commands[k] = d
		}
	}
	// A machine busy enough to shrink a subscription's in-flight limit
	// (the race detector's is) makes some deliveries wait all the same,
	// which is the wait's cost, not the delivery's: a put-off costs one
	// more handling (its MGET, and its wait note's script with the GET
	// and SET inside); a delivery parked in memory and woken is read
	// again (one MGET). Besides, the engine's success ledger writes each
	// subscription's last_success_at at most once a second (a GET, and
	// the compare-and-set script with its GET and SET): background that a
	// longer drain pays more of, counted by the engine.
	putOffs := int64(env.logs.total("delivery put off"))
	var total int64
	for _, n := range out.commands {
		total += n
	}
	waits := 4*putOffs + int64(parks)
	per := float64(total-waits-4*ledger) / float64(o.deliveries)
	t.Logf("%.2f Redis commands per delivery (drained in %s; %d put off, %d parked, %d ledger writes): %v",
		per, drain.Round(time.Millisecond), putOffs, parks, ledger, out.commands)
	if per > maxCommandsPerDelivery {
		t.Errorf("%.2f Redis commands per delivery, want at most %.1f: %v", per, maxCommandsPerDelivery, out.commands)
	}
	// The engine reads each delivery once, with its records (MGET), and
	// never with a GET of its own: the only GETs are those inside the
	// scripts, the success ledger's, and the bridge's scripts'. Outcomes
	// and put-offs' wait notes are written in bulk, one script call
	// comparing and setting a batch with a GET inside it per delivery, so
	// they count per delivery and per put-off, not per script (a run with
	// 634 put-offs read 2,166 GETs for 2,106 scripts and 48 ledger writes,
	// when each outcome was a script call of its own).
	if get, scripts := out.commands["get"], out.commands["evalsha"]+out.commands["eval"]; get > int64(o.deliveries)+scripts+putOffs+ledger {
		t.Errorf("%d GETs for %d deliveries, %d scripts run, %d put-offs and %d ledger writes: the engine reads a delivery outside its MGET (commands %v)",
			get, o.deliveries, scripts, putOffs, ledger, slices.Sorted(maps.Keys(out.commands)))
	}
	// Deliveries finishing together share a script call: under any load
	// at all, far fewer calls than outcomes.
	if scripts := out.commands["evalsha"] + out.commands["eval"]; scripts > int64(o.deliveries)*3/4+putOffs {
		t.Errorf("%d script calls for %d deliveries and %d put-offs: outcomes are not written together", scripts, o.deliveries, putOffs)
	}
}
