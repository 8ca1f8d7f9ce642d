package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// perfOptions are the performance scenario's flags.
type perfOptions struct {
	only           string // comma-separated case ids; "" runs them all
	subs           int    // subscriptions of the fast, slow, rate and replica cases, one tenant each
	deliveries     int    // deliveries of the fast-receiver and replica cases
	slowDeliveries int
	slowDelay      time.Duration
	sizedWorkers   int // JETRELAY_WORKERS of the sized slow-receiver case; 0 skips it
	fanSubs        int
	fanDead        float64
	fanEvents      int
	replicas       int
	rates          string // fixed rates, comma separated
	rateFor        time.Duration
	queued         int
	relayBinary    string // the jetrelay binary of the queued case; "" is this one
	refDeliveries  int
	refSlow        int
	ceilingFor     time.Duration
	emitters       int
	rateEmitters   int
	eventBytes     int
	settle         time.Duration
	chart          string

	// orderedDeliveries are the ordered case's (one at a time: fewer).
	orderedDeliveries int
}

func perfFlags(fs *pflag.FlagSet) benchRun {
	o := &perfOptions{}
	fs.StringVar(&o.only, "only", "", "run only these cases, comma separated (of "+strings.Join(perfCaseIDs, ", ")+"); default all")
	fs.IntVar(&o.subs, "subs", 10, "subscriptions (one tenant each, so every event is one delivery) of the fast, slow, fixed-rate and replica cases")
	fs.IntVar(&o.deliveries, "deliveries", 40000, "deliveries of the fast-receiver and replica cases")
	fs.IntVar(&o.orderedDeliveries, "ordered-deliveries", 10000, "deliveries of the ordered case (one subscription, JETRELAY_ORDERING=strict)")
	fs.IntVar(&o.slowDeliveries, "slow-deliveries", 10000, "deliveries of the slow-receiver cases")
	fs.DurationVar(&o.slowDelay, "slow-delay", 50*time.Millisecond, "how long the slow receiver takes to answer")
	fs.IntVar(&o.sizedWorkers, "sized-workers", 256, "a fixed pool (JETRELAY_WORKERS = JETRELAY_MIN_WORKERS) of this many workers for the extra slow-receiver case, hand-sized at rate × latency: what the elastic default is measured against; 0 skips it")
	fs.IntVar(&o.fanSubs, "fan-subs", 1000, "subscriptions of the fan-out case, all matching every event")
	fs.Float64Var(&o.fanDead, "fan-dead", 0.10, "share of the fan-out case's subscriptions whose endpoint is dead (connection refused)")
	fs.IntVar(&o.fanEvents, "fan-events", 20, "events of the fan-out case (each is one delivery per subscription)")
	fs.IntVar(&o.replicas, "replicas", 3, "replicas of the multi-replica case (in this process, sharing one NATS over TCP and one Redis)")
	fs.StringVar(&o.rates, "rates", "1000,5000", "fixed rates (deliveries/s) of the latency cases, comma separated")
	fs.DurationVar(&o.rateFor, "rate-for", 10*time.Second, "length of each fixed-rate case")
	fs.IntVar(&o.queued, "queued", 100000, "deliveries queued before jetrelay starts in the memory case (jetrelay run as a separate process)")
	fs.StringVar(&o.relayBinary, "relay-binary", "", "jetrelay binary whose `run` the memory case starts as a separate process; default: this one")
	fs.IntVar(&o.refDeliveries, "ref-deliveries", 3000, "deliveries the sequential reference loop sends to the fast receiver")
	fs.IntVar(&o.refSlow, "ref-slow-deliveries", 60, "deliveries the sequential reference loop sends to the slow receiver (~20/s)")
	fs.DurationVar(&o.ceilingFor, "ceiling-for", 5*time.Second, "how long the ceiling's workers POST")
	fs.IntVar(&o.emitters, "emitters", 128, "concurrent admin writers of the throughput cases (their commands share round trips through an autopipeliner)")
	fs.IntVar(&o.rateEmitters, "rate-emitters", 16, "concurrent admin writers of the fixed-rate cases (plain connections, one round trip per command)")
	fs.IntVar(&o.eventBytes, "event-bytes", 1024, "approximate size of each stored event (JSON)")
	fs.DurationVar(&o.settle, "settle", 3*time.Minute, "how long a case may take to deliver everything before it is reported incomplete")
	fs.StringVar(&o.chart, "chart", "", "write the throughput chart (PNG) here; default: next to --out, named after it (BENCHMARKS.png)")
	return func(ctx context.Context, b *benchContext) (*benchReport, error) {
		if err := o.validate(); err != nil {
			return nil, err
		}
		return runPerformance(ctx, b, o)
	}
}

// perfCaseIDs lists every case in the order they run.
var perfCaseIDs = []string{"ceiling", "fast", "fast-1", "drain", "drain-1", "drain-tcp", "ordered-1", "reference-fast", "slow", "slow-1", "slow-sized", "reference-slow", "fanout", "replicas-1", "replicas-n", "rate", "queued"}

func (o *perfOptions) validate() error {
	var errs []error
	for _, id := range o.onlyCases() {
		if !slices.Contains(perfCaseIDs, id) {
			errs = append(errs, fmt.Errorf("--only: unknown case %q (have %s)", id, strings.Join(perfCaseIDs, ", ")))
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"--subs", o.subs}, {"--deliveries", o.deliveries}, {"--slow-deliveries", o.slowDeliveries}, {"--fan-subs", o.fanSubs},
		{"--fan-events", o.fanEvents}, {"--replicas", o.replicas}, {"--queued", o.queued}, {"--ref-deliveries", o.refDeliveries},
		{"--ref-slow-deliveries", o.refSlow}, {"--ordered-deliveries", o.orderedDeliveries}, {"--emitters", o.emitters}, {"--rate-emitters", o.rateEmitters}} {
		if f.v < 1 || f.v > 10_000_000 {
			errs = append(errs, fmt.Errorf("%s must be 1..10000000", f.name))
		}
	}
	if o.subs > 1000 || o.fanSubs > 5000 || o.emitters > 256 || o.rateEmitters > 256 || o.replicas > 8 {
		errs = append(errs, errors.New("--subs ≤ 1000, --fan-subs ≤ 5000, --emitters and --rate-emitters ≤ 256, --replicas ≤ 8"))
	}
	if o.sizedWorkers < 0 || o.sizedWorkers > 4096 {
		errs = append(errs, errors.New("--sized-workers must be 0..4096"))
	}
	if o.fanDead < 0 || o.fanDead >= 1 || math.IsNaN(o.fanDead) {
		errs = append(errs, errors.New("--fan-dead must be in [0, 1)"))
	}
	if o.slowDelay <= 0 || o.rateFor <= 0 || o.ceilingFor <= 0 || o.settle <= 0 {
		errs = append(errs, errors.New("--slow-delay, --rate-for, --ceiling-for and --settle must be positive"))
	}
	if o.eventBytes < 400 || o.eventBytes > 256<<10 {
		errs = append(errs, errors.New("--event-bytes must be 400..262144"))
	}
	if _, err := o.rateList(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (o *perfOptions) onlyCases() []string {
	if o.only == "" {
		return nil
	}
	var out []string
	for id := range strings.SplitSeq(o.only, ",") {
		out = append(out, strings.TrimSpace(id))
	}
	return out
}

func (o *perfOptions) runs(id string) bool {
	only := o.onlyCases()
	return only == nil || slices.Contains(only, id)
}

func (o *perfOptions) rateList() ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(o.rates, ",") {
		var r float64
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%g", &r); err != nil || r <= 0 || r > 100000 || math.IsNaN(r) {
			return nil, fmt.Errorf("--rates: %q is not a rate in (0, 100000]", f)
		}
		out = append(out, r)
	}
	return out, nil
}

// runPerformance runs every selected case, each on a fresh Redis and
// JetStream, one after the other.
func runPerformance(ctx context.Context, b *benchContext, o *perfOptions) (*benchReport, error) {
	p := &perfRun{b: b, o: o}
	type step struct {
		id  string
		run func() ([]*perfResult, error)
	}
	one := func(f func() (*perfResult, error)) func() ([]*perfResult, error) {
		return func() ([]*perfResult, error) {
			r, err := f()
			return []*perfResult{r}, err
		}
	}
	fast := p.fastLayout()
	lone := layout{tenants: 1, subsPerTenant: 1}
	steps := []step{
		{"ceiling", one(func() (*perfResult, error) { return p.ceiling(ctx) })},
		{"fast", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "fast", title: "fast receiver", layout: fast, events: o.deliveries})
		})},
		// One subscription has the pool to itself: its adaptive in-flight
		// limit, not a fixed share, decides what it gets (docs/operations.md).
		{"fast-1", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "fast-1", title: "fast receiver, 1 subscription", layout: lone, events: o.deliveries})
		})},
		// Issue 22's measure of the ceiling share: the same shapes drained
		// from a preloaded backlog by `jetrelay run` in its own process, so
		// admin's writers do not share the CPUs while it delivers.
		{"drain", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "drain", title: "fast receiver, preloaded backlog", layout: fast, events: o.deliveries, prequeue: true})
		})},
		{"drain-1", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "drain-1", title: "fast receiver, 1 subscription, preloaded backlog", layout: lone, events: o.deliveries, prequeue: true})
		})},
		{"drain-tcp", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "drain-tcp", title: "fast receiver, NATS over TCP, preloaded backlog", layout: fast, events: o.deliveries, prequeue: true, tcp: true})
		})},
		// The same subscription ordered (docs/ordering.md): one send in
		// flight at a time across the fleet, so a round trip plus
		// jetrelay's own work per delivery bounds it.
		{"ordered-1", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "ordered-1", title: "fast receiver, 1 strictly ordered subscription", layout: lone,
				events: o.orderedDeliveries, settings: map[string]string{"JETRELAY_ORDERING": "strict"}})
		})},
		{"reference-fast", one(func() (*perfResult, error) {
			return p.reference(ctx, "reference-fast", "reference loop, fast receiver", 0, o.refDeliveries)
		})},
		{"slow", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "slow", title: fmt.Sprintf("receiver taking %s", o.slowDelay), layout: fast, delay: o.slowDelay, events: o.slowDeliveries})
		})},
		{"slow-1", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "slow-1", title: fmt.Sprintf("receiver taking %s, 1 subscription", o.slowDelay), layout: lone, delay: o.slowDelay, events: o.slowDeliveries})
		})},
		{"slow-sized", func() ([]*perfResult, error) {
			if o.sizedWorkers == 0 {
				return nil, nil
			}
			r, err := p.e2e(ctx, e2eCase{id: "slow-sized", title: fmt.Sprintf("receiver taking %s, fixed pool of %d workers", o.slowDelay, o.sizedWorkers), layout: fast,
				delay: o.slowDelay, events: o.slowDeliveries, settings: map[string]string{"JETRELAY_WORKERS": fmt.Sprint(o.sizedWorkers), "JETRELAY_MIN_WORKERS": fmt.Sprint(o.sizedWorkers)}})
			return []*perfResult{r}, err
		}},
		{"reference-slow", one(func() (*perfResult, error) {
			return p.reference(ctx, "reference-slow", fmt.Sprintf("reference loop, receiver taking %s", o.slowDelay), o.slowDelay, o.refSlow)
		})},
		{"fanout", one(func() (*perfResult, error) {
			dead := int(math.Round(float64(o.fanSubs) * o.fanDead))
			return p.e2e(ctx, e2eCase{id: "fanout", title: fmt.Sprintf("%d subscriptions, %d dead", o.fanSubs, dead),
				layout: layout{tenants: 1, subsPerTenant: o.fanSubs - dead, dead: dead}, events: o.fanEvents})
		})},
		{"replicas-1", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "replicas-1", title: "1 replica, NATS over TCP", layout: fast, events: o.deliveries, replicas: 1, tcp: true})
		})},
		{"replicas-n", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "replicas-n", title: fmt.Sprintf("%d replicas, NATS over TCP", o.replicas), layout: fast, events: o.deliveries, replicas: o.replicas, tcp: true})
		})},
		{"rate", func() ([]*perfResult, error) {
			rates, _ := o.rateList()
			var out []*perfResult
			for _, r := range rates {
				res, err := p.e2e(ctx, e2eCase{id: "rate", title: fmt.Sprintf("fixed rate %.0f/s", r), layout: fast,
					events: max(1, int(r*o.rateFor.Seconds())), every: time.Duration(float64(time.Second) / r), rate: r})
				if err != nil {
					return out, err
				}
				out = append(out, res)
			}
			return out, nil
		}},
		{"queued", one(func() (*perfResult, error) {
			return p.e2e(ctx, e2eCase{id: "queued", title: fmt.Sprintf("%d queued before start", o.queued), layout: fast, events: o.queued, prequeue: true})
		})},
	}
	var results []*perfResult
	for _, s := range steps {
		if !o.runs(s.id) {
			continue
		}
		rs, err := s.run()
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", s.id, err)
		}
		for _, r := range rs {
			b.stepf("%s: %s", r.title, r.line())
		}
		results = append(results, rs...)
	}
	return perfReport(b, o, results), nil
}
