package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

// The backlog scenario (issue 22): a healthy subscription drains its own
// preloaded backlog alone, then next to an equal backlog, interleaved with
// its own, for a black hole and for an endpoint answering 503. Its rate
// next to them is compared with its rate alone.

// backlogSection is the heading of the scenario's section of
// docs/isolation.md.
const backlogSection = "Isolation under a backlog"

// backlogOptions are the backlog scenario's flags.
type backlogOptions struct {
	deliveries     int
	rounds         int // rounds of the three cases, measured in turn; the report shows the median one
	emitters       int
	settle         time.Duration
	requestTimeout time.Duration // 0: the engine's default
}

func backlogFlags(fs *pflag.FlagSet) benchRun {
	o := &backlogOptions{}
	fs.IntVar(&o.deliveries, "deliveries", 20000, "deliveries preloaded for the healthy subscription, and as many for the bad one (20,000: a drain of 5,000 takes under a second on a fast machine, too short to measure)")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds of the four cases (alone, beside a black hole, beside a 503 endpoint, beside a backlog already delivered), measured in turn; the verdicts are on each ratio's median over the rounds (one drain of a few seconds on a shared machine is noise)")
	fs.IntVar(&o.emitters, "emitters", 16, "concurrent admin writers preloading the backlog")
	fs.DurationVar(&o.settle, "settle", 5*time.Minute, "how long the healthy subscription's drain may take in each case")
	fs.DurationVar(&o.requestTimeout, "request-timeout", 0, "JETRELAY_HTTP_REQUEST_TIMEOUT for the run (how long a send to the black hole hangs); default: the engine's")
	return func(ctx context.Context, b *benchContext) (*benchReport, error) {
		if o.deliveries < 10 || o.deliveries > 1_000_000 || o.rounds < 1 || o.rounds > 9 || o.emitters < 1 || o.emitters > 256 || o.settle <= 0 || o.requestTimeout < 0 {
			return nil, errors.New("backlog: --deliveries 10..1000000, --rounds 1..9, --emitters 1..256, --settle > 0, --request-timeout ≥ 0")
		}
		return runBacklog(ctx, b, o)
	}
}

// Kinds of bad subscription next to the healthy one. backlogDone is not
// a bad endpoint but the floor of any: its deliveries are already final
// when jetrelay starts, so each costs only what every work item costs
// before the engine can decide anything about it (the bridge's move, read
// and publish, JetStream's store, the engine's fetch, one read, the ack).
// However cheaply a bad endpoint's deliveries are held, the healthy
// subscription's rate beside them cannot be above its rate beside these.
const (
	backlogAlone     = ""
	backlogBlackHole = "black hole"
	backlogUnavail   = "503"
	backlogDone      = "done"
)

// backlogCases are the cases of one round, in turn: alone first (each
// ratio's reference), then the two bad endpoints issue 22 sets its target
// for, then the floor.
var backlogCases = []string{backlogAlone, backlogBlackHole, backlogUnavail, backlogDone}

// backlogCase is what one case measured, from jetrelay's start to the
// healthy subscription's last receipt.
type backlogCase struct {
	bad      string // backlogAlone, backlogBlackHole or backlogUnavail
	preload  time.Duration
	received int           // healthy deliveries received (each once)
	drain    time.Duration // start → last healthy receipt
	rate     float64       // deliveries / drain
	cpu      time.Duration // this process's CPU over the drain: jetrelay, NATS, the receivers
	redisCPU time.Duration
	settings engineSettings

	healthyPutOffs map[string]int // reason → the healthy subscription's put-offs logged
	// The bad subscription over the same time.
	badSends, badFailed int            // requests its endpoint saw; attempts that failed (logged)
	badPutOffs          map[string]int // reason → put-offs logged
	parks               engine.ParkStats
	bridge              bridge.Stats // Parked and Unparked are the bad subscription's
	// putOffPath is the CPU of the drain's profile samples in the
	// engine's put-off path (putOffPathOf), scaled to this process's CPU;
	// profiled is false when the case could not be profiled.
	putOffPath time.Duration
	profiled   bool
}

func runBacklog(ctx context.Context, b *benchContext, o *backlogOptions) (*benchReport, error) {
	var rounds [][]*backlogCase
	for i := range o.rounds {
		var cases []*backlogCase
		for _, bad := range backlogCases {
			c, err := runBacklogCase(ctx, b, o, bad)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", caseTitle(bad), err)
			}
			b.stepf("  round %d of %d, %s: %d healthy deliveries in %s: %.0f deliveries/s", i+1, o.rounds, caseTitle(bad), c.received, c.drain.Round(time.Millisecond), c.rate)
			cases = append(cases, c)
		}
		rounds = append(rounds, cases)
	}
	return backlogReport(o, rounds), nil
}

// backlogRatios are a round's ratios to its own alone case, in the order
// of backlogCases after alone (black hole, 503, done).
func backlogRatios(cases []*backlogCase) []float64 {
	r := make([]float64, len(cases)-1)
	if cases[0].rate > 0 {
		for k, c := range cases[1:] {
			r[k] = c.rate / cases[0].rate
		}
	}
	return r
}

// cpuPerHealthy is the CPU (this process and redis-server) the case spent
// per healthy delivery; 0 when none arrived.
func (c *backlogCase) cpuPerHealthy() time.Duration {
	if c.received == 0 {
		return 0
	}
	return (c.cpu + c.redisCPU) / time.Duration(c.received)
}

// backlogCPURatios are a round's ratios of the alone case's CPU per
// healthy delivery to each other case's, in backlogRatios' order: the
// rate each case would keep if the drain were bound by CPU alone. They
// are steadier than the rate ratios on a shared machine, where one short
// drain's rate swings with whatever else runs.
func backlogCPURatios(cases []*backlogCase) []float64 {
	r := make([]float64, len(cases)-1)
	if alone := cases[0].cpuPerHealthy(); alone > 0 {
		for k, c := range cases[1:] {
			if per := c.cpuPerHealthy(); per > 0 {
				r[k] = float64(alone) / float64(per)
			}
		}
	}
	return r
}

// badCPU is what one of the bad subscription's deliveries cost in case k
// of a round (1: black hole, 2: 503), in CPU of this process and
// redis-server: the case's CPU above alone's, divided by the bad
// backlog's n deliveries, parked at intake or put off (its few sends
// included). ok is false when either drain is incomplete.
func badCPU(cases []*backlogCase, k, n int) (time.Duration, bool) {
	bad, alone := cases[k], cases[0]
	if n == 0 || alone.received == 0 || bad.received != alone.received {
		return 0, false
	}
	return (bad.cpu + bad.redisCPU - alone.cpu - alone.redisCPU) / time.Duration(n), true
}

// putOffPathCPU is what the engine's own put-off path spent per put-off
// in case c (the bad subscription's, and the healthy one's few), from the case's CPU profile: the
// samples with a put-off function in their stack. It leaves out what the
// put-offs cost outside the engine (JetStream storing their messages,
// redis-server running their scripts), which badCPU includes, but it
// does not difference two drains' CPU, so the noise of a shared machine
// moves it far less. ok is false without a profile or put-offs.
func putOffPathCPU(c *backlogCase) (time.Duration, bool) {
	n := 0
	for _, k := range c.badPutOffs {
		n += k
	}
	for _, k := range c.healthyPutOffs {
		n += k // in the same path, rarely
	}
	if !c.profiled || n == 0 {
		return 0, false
	}
	return c.putOffPath / time.Duration(n), true
}

// medianRound is the round whose two target ratios (black hole, 503) have
// the median sum (the lower middle one for an even count): the one the
// report's tables show.
func medianRound(rounds [][]*backlogCase) []*backlogCase {
	sorted := slices.Clone(rounds)
	mean := func(cases []*backlogCase) float64 { r := backlogRatios(cases); return r[0] + r[1] }
	slices.SortStableFunc(sorted, func(a, b []*backlogCase) int { return cmp.Compare(mean(a), mean(b)) })
	return sorted[(len(sorted)-1)/2]
}

func caseTitle(bad string) string {
	switch bad {
	case backlogBlackHole:
		return "beside a black hole"
	case backlogUnavail:
		return "beside an endpoint answering 503"
	case backlogDone:
		return "beside a backlog already delivered (the floor)"
	}
	return "alone"
}

// unavailable answers every request 503 at once, counting them.
type unavailable struct{ requests atomic.Int64 }

func (u *unavailable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	u.requests.Add(1)
	w.WriteHeader(http.StatusServiceUnavailable)
}

// runBacklogCase preloads the backlog on a fresh environment, starts
// jetrelay and measures until the healthy subscription is drained; what
// the bad subscription still has queued then is left behind.
func runBacklogCase(ctx context.Context, b *benchContext, o *backlogOptions, bad string) (*backlogCase, error) {
	var settings map[string]string
	if o.requestTimeout > 0 {
		settings = map[string]string{webhook.SettingRequestTimeout: o.requestTimeout.String()}
	}
	env, err := startBenchEnv(ctx, b, envOptions{held: true, settings: settings})
	if err != nil {
		return nil, err
	}
	defer env.close()
	c := &backlogCase{bad: bad, settings: settingsOf(env)}
	p := &perfRun{b: b, o: &perfOptions{}}
	f, err := p.newFleet(ctx, env, layout{tenants: 1, subsPerTenant: 1}, 0)
	if err != nil {
		return nil, err
	}
	healthyID := slices.Collect(maps.Keys(f.healthy))[0]

	spec := emission{tenant: f.tenants[0], eventType: healthyEventType, events: o.deliveries, workers: o.emitters}
	var badID string
	var sends func() int
	if bad != backlogAlone {
		var url string
		switch bad {
		case backlogBlackHole:
			hole, err := env.blackHole()
			if err != nil {
				return nil, err
			}
			url, sends = "http://"+hole.addr()+"/hole", hole.connections
		case backlogUnavail, backlogDone:
			// The floor's deliveries are final before jetrelay starts:
			// a send to this endpoint would be a bug, and shows.
			u := &unavailable{}
			addr, err := env.serve(u)
			if err != nil {
				return nil, err
			}
			url, sends = "http://"+addr+"/unavailable", func() int { return int(u.requests.Load()) }
		}
		if badID, _, err = env.admin.CreateSubscription(ctx, admin.Subscription{
			TenantID: f.tenants[0], Name: "bench " + bad, URL: url, EventTypes: []string{badEventType},
		}); err != nil {
			return nil, err
		}
		// Alternate events healthy / bad, as admin enqueues them when
		// both subscriptions' events come in turn.
		spec.eventTypes, spec.events = []string{healthyEventType, badEventType}, 2*o.deliveries
	}
	besides := ""
	if bad != backlogAlone {
		besides = fmt.Sprintf(", %d for the %s, interleaved", o.deliveries, bad)
	}
	b.stepf("%s: %d deliveries preloaded for the healthy subscription%s", caseTitle(bad), o.deliveries, besides)
	t := time.Now()
	if err := emit(ctx, env.admin, spec, newEmitted()); err != nil {
		return nil, err
	}
	c.preload = time.Since(t)
	if bad == backlogDone {
		n, err := markDelivered(ctx, env.adminDB, badID)
		if err != nil {
			return nil, err
		}
		if n != o.deliveries {
			return nil, fmt.Errorf("%d deliveries of the floor's subscription marked delivered, want %d", n, o.deliveries)
		}
	}

	prof := startCaseProfile()
	u0, r0 := resourcesNow(), env.redisCPU(ctx)
	if err := env.start(ctx); err != nil {
		prof.stopBy(putOffPathOf)
		return nil, err
	}
	err = awaitDrained(ctx, env, f, o.deliveries, o.settle)
	u1, r1 := resourcesNow(), env.redisCPU(ctx)
	summary := prof.stopBy(putOffPathOf)
	if err != nil {
		return nil, err
	}
	b.keepProfile("backlog beside "+cmp.Or(bad, "nothing"), prof)
	c.cpu, c.redisCPU = u1.cpu-u0.cpu, r1-r0
	if summary != nil && summary.samples > 0 {
		c.profiled = true
		c.putOffPath = time.Duration(float64(c.cpu) * float64(summary.components[stepPutOffs]) / float64(summary.samples))
	}
	c.parks = env.stack.Engine().ParkStats()
	c.bridge = env.stack.Bridge().Stats()
	var last time.Time
	for _, r := range f.sink.receipts() {
		c.received++
		if r.at.After(last) {
			last = r.at
		}
	}
	if c.drain = last.Sub(u0.at); c.drain > 0 {
		c.rate = float64(c.received) / c.drain.Seconds()
	}
	c.healthyPutOffs = env.logs.reasons(healthyID, "delivery put off")
	if badID != "" {
		c.badSends = sends()
		c.badPutOffs = env.logs.reasons(badID, "delivery put off")
		c.badFailed = env.logs.count(badID, "delivery attempt failed; retry scheduled", "") + env.logs.count(badID, "delivery failed", "")
	}
	return c, nil
}

// markDelivered sets every queued delivery of subscription sub to SUCCESS,
// as if an earlier run had delivered it and its work item came back (a
// processing list recovered after the dedupe window): the engine reads
// it, finds it final and acks its work item. It returns how many it
// marked.
func markDelivered(ctx context.Context, rdb *redis.Client, sub string) (int, error) {
	ids, err := rdb.LRange(ctx, store.PendingList, 0, -1).Result()
	if err != nil {
		return 0, fmt.Errorf("read dispatch:pending: %w", err)
	}
	// Each SET keeps the record's TTL; one pipeline writes them all.
	pipe := rdb.Pipeline()
	n := 0
	err = eachDelivery(ctx, rdb, ids, func(id, raw string) error {
		if gjson.Get(raw, "subscription_id").String() != sub {
			return nil
		}
		done, err := sjson.Set(raw, "status", string(proto.DeliverySuccess))
		if err != nil {
			return fmt.Errorf("mark %s delivered: %w", id, err)
		}
		pipe.Set(ctx, store.DeliveryKey(id), done, redis.KeepTTL)
		n++
		return nil
	})
	if err != nil {
		return 0, err
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("mark deliveries delivered: %w", err)
	}
	return n, nil
}
