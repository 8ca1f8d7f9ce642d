package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	flag "github.com/spf13/pflag"
	"slices"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// orderingOptions are the ordering scenario's flags: what ordered delivery
// costs (docs/ordering.md, "Cost, measured").
type orderingOptions struct {
	perf            perfOptions // the fast case's settings, as the performance scenario has them
	ordered         int         // deliveries of each one-line case
	pairs           int         // alone/beside pairs of the unordered fast case
	lines           int         // busy ordered subscriptions beside the unordered ones
	lineBacklog     int         // events queued to every busy line before the measurement
	lineDelay       time.Duration
	roundTripFor    time.Duration
	baselineBinary  string // a jetrelay from before ordered delivery, for the ordering-off comparison
	relayBinary     string
	drainDeliveries int
}

// orderingSection is the heading the scenario writes in docs/ordering.md.
const orderingSection = "Cost, measured"

// Targets of issue 23.
const (
	targetOrderedRate  = 1000 // deliveries/s of one ordered subscription, fast receiver
	targetBesideLines  = 0.90 // unordered throughput beside busy lines, of alone
	orderedSubsTenant  = "bench-ordered"
	orderedEventType   = badEventType // the busy lines' events: the unordered fleet does not match them
	defaultBaselineRev = "9b8fc18"    // main just before ordered delivery was merged (Taskfile bench:ordering builds it)
)

func orderingFlags(fs *flag.FlagSet) benchRun {
	o := &orderingOptions{}
	fs.IntVar(&o.ordered, "ordered-deliveries", 5000, "deliveries of each one-subscription ordered case (first-attempt, strict)")
	fs.IntVar(&o.perf.subs, "subs", 10, "unordered subscriptions (one tenant each) of the fast cases, as the performance scenario's fast case")
	fs.IntVar(&o.perf.deliveries, "deliveries", 40000, "deliveries of the fast cases (the performance scenario's default)")
	fs.IntVar(&o.pairs, "pairs", 5, "alone/beside measurements of the unordered fast case, taken in turn; the verdict is on their median ratio (one pair on a shared machine is noise)")
	fs.IntVar(&o.lines, "lines", 100, "busy ordered subscriptions beside the unordered ones")
	fs.IntVar(&o.lineBacklog, "line-backlog", 120, "deliveries queued to each busy line before the measurement (it must outlast it; the report says whether it did)")
	fs.DurationVar(&o.lineDelay, "line-delay", 500*time.Millisecond, "how long the busy lines' receiver takes to answer (each line has one send in flight all along)")
	fs.DurationVar(&o.roundTripFor, "round-trip-for", 3*time.Second, "how long one sender POSTs back to back to the fast receiver, for the round trip")
	fs.StringVar(&o.baselineBinary, "baseline-binary", "", "jetrelay binary from before ordered delivery (git "+defaultBaselineRev+"): its `run` drains the same backlog as this one's, for Redis commands and throughput per delivery with ordering off; empty skips it")
	fs.StringVar(&o.relayBinary, "relay-binary", "", "this jetrelay's binary for that comparison; default: this one")
	fs.IntVar(&o.drainDeliveries, "drain-deliveries", 20000, "deliveries preloaded, then drained, by each binary of the ordering-off comparison")
	fs.IntVar(&o.perf.emitters, "emitters", 128, "concurrent admin writers")
	fs.IntVar(&o.perf.eventBytes, "event-bytes", 1024, "approximate size of each stored event (JSON)")
	fs.DurationVar(&o.perf.settle, "settle", 3*time.Minute, "how long a case may take to deliver everything")
	return func(ctx context.Context, b *benchContext) (*benchReport, error) {
		if o.ordered < 100 || o.perf.subs < 1 || o.perf.subs > 1000 || o.perf.deliveries < 1000 || o.lines < 1 || o.lines > 1000 || o.pairs < 1 || o.pairs > 9 ||
			o.lineBacklog < 1 || o.lineDelay <= 0 || o.roundTripFor <= 0 || o.drainDeliveries < 100 || o.perf.emitters < 1 ||
			o.perf.emitters > 256 || o.perf.eventBytes < 400 || o.perf.settle <= 0 {
			return nil, errors.New("ordering: --ordered-deliveries ≥ 100, --subs 1..1000, --deliveries ≥ 1000, --lines 1..1000, --pairs 1..9, --line-backlog ≥ 1, --drain-deliveries ≥ 100, --emitters 1..256, --event-bytes ≥ 400, durations > 0")
		}
		return runOrdering(ctx, b, o)
	}
}

// orderingResults is what the scenario measured.
type orderingResults struct {
	roundTrip           *perfResult   // one sender POSTing back to back, no queue
	firstAttempt        *perfResult   // one first-attempt subscription
	strict              *perfResult   // one strict subscription
	alone, beside       *perfResult   // the unordered fast case alone, and beside busy lines: the pair with the median ratio
	besideLines         linesObserved // what the busy lines did during it
	pairs               []besidePair  // every pair, in the order measured
	thisDrain, oldDrain *outsideFigures
}

// besidePair is one alone/beside measurement of the unordered fast case.
type besidePair struct {
	alone, beside *perfResult
	lines         linesObserved
}

func (p besidePair) ratio() float64 { return p.beside.throughput / max(p.alone.throughput, 1e-9) }

// linesObserved is what the busy ordered lines did while the unordered
// fast case was measured.
type linesObserved struct {
	lines, busyAtStart, busyAtEnd int
	sent                          int // the lines' receiver's accepted requests during the case
}

func runOrdering(ctx context.Context, b *benchContext, o *orderingOptions) (*benchReport, error) {
	p := &perfRun{b: b, o: &o.perf}
	r := &orderingResults{}
	var err error
	if r.roundTrip, err = p.roundTrip(ctx, o.roundTripFor); err != nil {
		return nil, fmt.Errorf("round trip: %w", err)
	}
	b.stepf("round trip: %s", r.roundTrip.line())
	lone := layout{tenants: 1, subsPerTenant: 1}
	for _, c := range []struct {
		mode proto.Ordering
		into **perfResult
	}{{proto.OrderingFirstAttempt, &r.firstAttempt}, {proto.OrderingStrict, &r.strict}} {
		res, err := p.e2e(ctx, e2eCase{id: "ordered-" + string(c.mode), title: "fast receiver, 1 subscription, " + string(c.mode),
			layout: lone, events: o.ordered, settings: map[string]string{"JETRELAY_ORDERING": string(c.mode)}})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.mode, err)
		}
		b.stepf("%s: %s", res.title, res.line())
		*c.into = res
	}
	fast := p.fastLayout()
	for i := range o.pairs {
		var pair besidePair
		if pair.alone, err = p.e2e(ctx, e2eCase{id: "fast", title: fmt.Sprintf("fast receiver, %d unordered subscriptions, ordering off", o.perf.subs), layout: fast, events: o.perf.deliveries}); err != nil {
			return nil, fmt.Errorf("fast: %w", err)
		}
		b.stepf("%s (pair %d of %d): %s", pair.alone.title, i+1, o.pairs, pair.alone.line())
		busy := &busyLines{o: o}
		if pair.beside, err = p.e2e(ctx, e2eCase{id: "fast-beside-lines", title: fmt.Sprintf("the same, beside %d busy first-attempt lines", o.lines),
			layout: fast, events: o.perf.deliveries, beside: busy.start, after: busy.finish}); err != nil {
			return nil, fmt.Errorf("beside lines: %w", err)
		}
		pair.lines = busy.seen
		b.stepf("%s (pair %d of %d): %s; %s %% of alone", pair.beside.title, i+1, o.pairs, pair.beside.line(), percentDown(pair.ratio()))
		r.pairs = append(r.pairs, pair)
	}
	med := medianPair(r.pairs)
	r.alone, r.beside, r.besideLines = med.alone, med.beside, med.lines
	if o.baselineBinary != "" {
		bin, err := relayBinary(o.relayBinary)
		if err != nil {
			return nil, err
		}
		co := &costOptions{deliveries: o.drainDeliveries, subs: o.perf.subs, emitters: o.perf.emitters, eventBytes: o.perf.eventBytes, settle: o.perf.settle}
		if r.thisDrain, err = outsideDrain(ctx, b, co, bin); err != nil {
			return nil, fmt.Errorf("drain by this build: %w", err)
		}
		if r.oldDrain, err = outsideDrain(ctx, b, co, o.baselineBinary); err != nil {
			return nil, fmt.Errorf("drain by the baseline: %w", err)
		}
	}
	return orderingReport(o, r), nil
}

// roundTrip measures what one delivery of an ordered line cannot go below
// on the network side: one sender POSTing signed events to the fast
// receiver back to back with jetrelay's own HTTP client, no queue.
func (p *perfRun) roundTrip(ctx context.Context, d time.Duration) (*perfResult, error) {
	p.b.stepf("round trip: one sender POSTing for %s, no queue", d)
	env, err := startBenchEnv(ctx, p.b, envOptions{encrypt: true, held: true})
	if err != nil {
		return nil, err
	}
	defer env.close()
	f, err := p.newFleet(ctx, env, layout{tenants: 1, subsPerTenant: 1}, 0)
	if err != nil {
		return nil, err
	}
	load := newEmitted()
	if err := emit(ctx, env.admin, emission{tenants: f.tenants, eventType: healthyEventType, events: 1, workers: 1, data: eventData(p.o.eventBytes)}, load); err != nil {
		return nil, err
	}
	var body []byte
	for id := range load.at {
		if body, err = env.adminDB.Get(ctx, store.EventKey(id)).Bytes(); err != nil {
			return nil, err
		}
	}
	res := &perfResult{id: "round-trip", title: "one sender POSTing, no queue", kind: kindCeiling, replicas: 1, workers: 1, latency: true, eventBytes: len(body)}
	u0 := resourcesNow()
	lat, fails := ceilingWorker(ctx, env.stack.Webhook(), f, body, 0, 1, u0.at.Add(d))
	u1 := resourcesNow()
	res.cpu, res.wall, res.span = u1.cpu-u0.cpu, u1.at.Sub(u0.at), u1.at.Sub(u0.at)
	res.succeeded, res.expected = len(lat), len(lat)+fails
	res.throughput = float64(res.succeeded) / res.span.Seconds()
	res.setLatency(lat)
	return res, nil
}

// busyLines are the ordered subscriptions beside the unordered fast case:
// each has a backlog on its line and one send in flight all along, to a
// receiver taking lineDelay.
type busyLines struct {
	o    *orderingOptions
	sink *sink
	seen linesObserved
	sent int
	// paceBacklog, when set (tests), has the backlog emitted one event at
	// a time and is called after each.
	paceBacklog func(ctx context.Context) error
}

// start creates the lines' subscriptions (first-attempt, their own
// setting), queues their backlog and waits until every line holds work
// and has sent.
func (l *busyLines) start(ctx context.Context, env *benchEnv) error {
	l.sink = newSink(l.o.lineDelay)
	addr, err := env.serve(l.sink)
	if err != nil {
		return err
	}
	st := store.New(env.adminDB)
	for i := range l.o.lines {
		path := fmt.Sprintf("/line-%04d", i+1)
		id, secret, err := env.admin.CreateSubscription(ctx, admin.Subscription{TenantID: orderedSubsTenant, Name: "bench " + path[1:],
			URL: "http://" + addr + path, EventTypes: []string{orderedEventType}})
		if err != nil {
			return err
		}
		l.sink.expect(path, secret)
		if err := st.SetOrdering(ctx, id, proto.OrderingFirstAttempt); err != nil {
			return err
		}
	}
	// The bridges read the ordering index about once a second: events
	// emitted before they have it go out unordered. One event at a time
	// until the lines show up, then the backlog (every event is one
	// delivery to each line).
	deadline := time.Now().Add(time.Minute)
	one := emission{tenant: orderedSubsTenant, eventType: orderedEventType, events: 1, workers: 1}
	for {
		if err := emit(ctx, env.admin, one, newEmitted()); err != nil {
			return err
		}
		busy, err := busyCount(ctx, env)
		if err != nil {
			return err
		}
		if busy > 0 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("after a minute the bridge still routes the ordered subscriptions' deliveries in parallel")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The receiver holds its answers while the backlog is emitted, so
	// every line still holds work when the emission ends however slowly
	// it went (admin's writes share the CPUs with everything else).
	l.sink.hold()
	defer l.sink.release()
	if err := l.emitBacklog(ctx, env); err != nil {
		return err
	}
	if err := await(ctx, func() (bool, error) {
		n, err := busyCount(ctx, env)
		return n >= l.o.lines, err
	}); err != nil {
		return fmt.Errorf("the ordered lines do not all hold work once the backlog is emitted: %w", err)
	}
	before := l.sink.accepted()
	l.sink.release()
	if err := await(ctx, func() (bool, error) { return l.sink.accepted() >= before+l.o.lines, nil }); err != nil {
		return fmt.Errorf("the ordered lines' receiver answered again but took %d of their %d held sends: %w", l.sink.accepted()-before, l.o.lines, err)
	}
	busy, err := busyCount(ctx, env)
	if err != nil {
		return err
	}
	l.seen = linesObserved{lines: l.o.lines, busyAtStart: busy}
	l.sent = l.sink.accepted()
	return nil
}

// emitBacklog emits lineBacklog events, each one delivery to every line.
func (l *busyLines) emitBacklog(ctx context.Context, env *benchEnv) error {
	spec := emission{tenant: orderedSubsTenant, eventType: orderedEventType, events: l.o.lineBacklog, workers: 8}
	if l.paceBacklog == nil {
		return emit(ctx, env.admin, spec, newEmitted())
	}
	spec.events, spec.workers = 1, 1
	for range l.o.lineBacklog {
		if err := emit(ctx, env.admin, spec, newEmitted()); err != nil {
			return err
		}
		if err := l.paceBacklog(ctx); err != nil {
			return err
		}
	}
	return nil
}

// await asks done every 100 ms until it holds, for up to a minute.
func await(ctx context.Context, done func() (bool, error)) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("still not after a minute")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// finish records whether the lines stayed busy through the measurement.
func (l *busyLines) finish(ctx context.Context, env *benchEnv) (string, error) {
	busy, err := busyCount(ctx, env)
	if err != nil {
		return "", err
	}
	l.seen.busyAtEnd, l.seen.sent = busy, l.sink.accepted()-l.sent
	return fmt.Sprintf("beside %d first-attempt lines, each with a backlog, sending to a receiver taking %s: %d of them held work at the start, %d at the end; they sent %d deliveries meanwhile",
		l.seen.lines, l.o.lineDelay, l.seen.busyAtStart, l.seen.busyAtEnd, l.seen.sent), nil
}

// busyCount is how many ordered lines hold work items.
func busyCount(ctx context.Context, env *benchEnv) (int, error) {
	lines, err := queue.OrderedLines(ctx, env.stack.JetStream(), queue.Config{Stream: env.cfg.Stream, Subject: env.cfg.Subject, Consumer: env.cfg.Consumer})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range lines {
		if v > 0 {
			n++
		}
	}
	return n, nil
}

// commandsDiff is the commands one drain ran per delivery more (or fewer)
// than the other, by command, largest first.
func commandsDiff(a, b *outsideFigures) []string {
	names := map[string]bool{}
	for k := range a.commands {
		names[k] = true
	}
	for k := range b.commands {
		names[k] = true
	}
	type diff struct {
		name string
		d    float64
	}
	var ds []diff
	for k := range names {
		d := float64(a.commands[k])/float64(max(a.n, 1)) - float64(b.commands[k])/float64(max(b.n, 1))
		if d >= 0.005 || d <= -0.005 {
			ds = append(ds, diff{k, d})
		}
	}
	slices.SortFunc(ds, func(x, y diff) int {
		switch {
		case abs(x.d) > abs(y.d):
			return -1
		case abs(x.d) < abs(y.d):
			return 1
		}
		return 0
	})
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("`%s` %+.3f", d.name, d.d)
	}
	return out
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// medianPair is the pair whose ratio is the median (the lower middle one
// for an even count).
func medianPair(pairs []besidePair) besidePair {
	sorted := slices.Clone(pairs)
	slices.SortFunc(sorted, func(a, b besidePair) int { return cmp.Compare(a.ratio(), b.ratio()) })
	return sorted[(len(sorted)-1)/2]
}
