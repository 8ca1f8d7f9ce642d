package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/webhook"
	"github.com/spf13/pflag"
)

// isolationOptions are the isolation scenario's flags.
type isolationOptions struct {
	healthySubs   int
	rate          float64       // healthy deliveries per second, over all healthy subscriptions
	duration      time.Duration // length of the healthy stream
	badDeliveries int           // deliveries queued to each bad subscription
	before        float64       // share of those queued before the healthy stream starts
	slowDelay     time.Duration
	settle        time.Duration // how long healthy deliveries may take to finish after the stream
	emitters      int
}

const (
	benchTenant      = "bench"
	healthyEventType = "budget.exhausted"
	badEventType     = "budget.threshold_crossed"
)

func isolationFlags(fs *pflag.FlagSet) benchRun {
	o := &isolationOptions{}
	fs.IntVar(&o.healthySubs, "healthy-subs", 20, "healthy subscriptions")
	fs.Float64Var(&o.rate, "rate", 500, "healthy deliveries per second, all healthy subscriptions together")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "length of the healthy stream in each phase")
	fs.IntVar(&o.badDeliveries, "bad-deliveries", 10000, "deliveries queued to each of the dead, black-hole and slow subscriptions in phase B")
	fs.Float64Var(&o.before, "before", 0.5, "share of the bad deliveries queued before the healthy stream starts (the rest is queued during it)")
	fs.DurationVar(&o.slowDelay, "slow-delay", 5*time.Second, "how long the slow endpoint takes to answer")
	fs.DurationVar(&o.settle, "settle", time.Minute, "how long healthy deliveries may take to finish after the stream ends")
	fs.IntVar(&o.emitters, "emitters", 4, "concurrent admin writers")
	return func(ctx context.Context, b *benchContext) (*benchReport, error) {
		if err := o.validate(); err != nil {
			return nil, err
		}
		return runIsolation(ctx, b, o)
	}
}

func (o *isolationOptions) validate() error {
	var errs []error
	if o.healthySubs < 1 || o.healthySubs > 1000 {
		errs = append(errs, errors.New("--healthy-subs must be 1..1000"))
	}
	if o.rate <= 0 || o.rate > 100000 || math.IsNaN(o.rate) {
		errs = append(errs, errors.New("--rate must be in (0, 100000]"))
	}
	if o.duration <= 0 || o.settle <= 0 || o.slowDelay <= 0 {
		errs = append(errs, errors.New("--duration, --settle and --slow-delay must be positive"))
	}
	if o.badDeliveries < 0 || o.badDeliveries > 1_000_000 {
		errs = append(errs, errors.New("--bad-deliveries must be 0..1000000"))
	}
	if o.before < 0 || o.before > 1 || math.IsNaN(o.before) {
		errs = append(errs, errors.New("--before must be 0..1"))
	}
	if o.emitters < 1 || o.emitters > 256 {
		errs = append(errs, errors.New("--emitters must be 1..256"))
	}
	if errs == nil && o.healthyEvents() < 1 {
		errs = append(errs, errors.New("--rate × --duration must give every healthy subscription at least one delivery"))
	}
	return errors.Join(errs...)
}

// healthyEvents is how many events the healthy stream emits: each one fans
// out to every healthy subscription.
func (o *isolationOptions) healthyEvents() int {
	return int(o.rate * o.duration.Seconds() / float64(o.healthySubs))
}

func runIsolation(ctx context.Context, b *benchContext, o *isolationOptions) (*benchReport, error) {
	b.stepf("phase A: %d healthy subscriptions, %.0f deliveries/s for %s", o.healthySubs, o.rate, o.duration)
	a, err := runIsolationPhase(ctx, b, o, false)
	if err != nil {
		return nil, fmt.Errorf("phase A: %w", err)
	}
	b.stepf("phase A: %s", a.healthy.line())
	b.stepf("phase B: the same, next to dead, black-hole and slow subscriptions with %d queued deliveries each", o.badDeliveries)
	p, err := runIsolationPhase(ctx, b, o, true)
	if err != nil {
		return nil, fmt.Errorf("phase B: %w", err)
	}
	b.stepf("phase B: %s", p.healthy.line())
	return isolationReport(o, a, p), nil
}

// phaseResult is what one phase measured.
type phaseResult struct {
	healthy        healthyResult
	bad            []badResult
	settings       engineSettings
	wall, cpu      time.Duration // of this process, from jetrelay's start to the end of the measurement
	redisCPU       time.Duration
	peakRSS        int64
	peakRSSLife    bool // the peak could not be reset: it is the process's lifetime peak
	heapPeak       uint64
	waiting        queue.Waiting // waiting work in the dispatch stream at the end
	heapWaiting    uint64        // Go heap in use after a GC at the end, with that work waiting
	peakAckPending int
	warnings       map[string]int
	timeline       []workSample
	streamStart    time.Time // when the healthy stream (and the timeline) started
}

// healthyResult is the healthy subscriptions' side of a phase.
type healthyResult struct {
	expected, succeeded int
	throughput          float64          // SUCCESS records per second, first enqueue → last completed_at
	span                time.Duration    // first enqueue → last completed_at
	p50, p95, p99, max  time.Duration    // enqueue → receipt at the receiver
	received            []healthyLatency // every healthy delivery's, in no order
	emitLag             time.Duration    // worst lag of the load generator behind its schedule
	complete            bool
}

func (h healthyResult) line() string {
	return fmt.Sprintf("%d/%d SUCCESS, %.1f deliveries/s, latency p50 %s p95 %s p99 %s", h.succeeded, h.expected, h.throughput, ms(h.p50), ms(h.p95), ms(h.p99))
}

// badResult is one misbehaving subscription's side of phase B.
type badResult struct {
	name, behaviour string
	queued          int
	sends           int // attempts recorded in the delivery records
	endpointSaw     string
	byStatus        map[proto.DeliveryStatus]int
	parkedNow       int
	parkedPutOffs   map[string]int // reason → parked put-offs logged
	failedAttempts  int
	subStatus       string
}

// engineSettings are the isolation knobs the phase ran with.
type engineSettings struct {
	workers, minWorkers, maxInFlight, breakerThreshold, maxAckPending int
	breakerOpen, breakerMaxOpen, parkAfter, ackWait                   time.Duration
	connectTimeout, requestTimeout                                    time.Duration
}

// badSub is a misbehaving subscription of phase B and its endpoint.
type badSub struct {
	name, behaviour, url string
	id                   string
	saw                  func() string
}

func runIsolationPhase(ctx context.Context, b *benchContext, o *isolationOptions, withBad bool) (*phaseResult, error) {
	lifetimePeak := !resetPeakRSS()
	env, err := startBenchEnv(ctx, b, envOptions{})
	if err != nil {
		return nil, err
	}
	defer env.close()
	res := &phaseResult{peakRSSLife: lifetimePeak, settings: settingsOf(env)}

	recv := receiver.New()
	endpoints := make([]*receiver.Endpoint, o.healthySubs)
	subIDs := make([]string, o.healthySubs) // endpoints[i]'s subscription
	for i := range endpoints {
		path := fmt.Sprintf("/healthy-%02d", i+1)
		addr, err := env.serve(recv)
		if err != nil {
			return nil, err
		}
		var secret string
		subIDs[i], secret, err = env.admin.CreateSubscription(ctx, admin.Subscription{
			TenantID: benchTenant, Name: "bench healthy " + path[1:], URL: "http://" + addr + path, EventTypes: []string{healthyEventType},
		})
		if err != nil {
			return nil, err
		}
		endpoints[i] = recv.Handle(path, secret, receiver.Healthy())
	}

	var bad []*badSub
	if withBad {
		if bad, err = startBadEndpoints(ctx, env, o); err != nil {
			return nil, err
		}
	}
	badLoad := newEmitted()
	before := int(math.Round(float64(o.badDeliveries) * o.before))
	if withBad && before > 0 {
		t := time.Now()
		if err := emit(ctx, env.admin, emission{tenant: benchTenant, eventType: badEventType, events: before, workers: o.emitters}, badLoad); err != nil {
			return nil, err
		}
		b.stepf("  queued %d deliveries to the bad subscriptions in %s", len(badLoad.deliveries), time.Since(t).Round(time.Millisecond))
	}

	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	peakAck := env.consumerPeak(sampleCtx, 250*time.Millisecond)
	heapPeak := sampleHeap(sampleCtx, 250*time.Millisecond)

	res.streamStart = time.Now()
	timeline := env.timeline(sampleCtx, res.streamStart, time.Second, func() int {
		n := 0
		for _, ep := range endpoints {
			n += ep.Stats().Unique
		}
		return n
	})
	healthyLoad := newEmitted()
	var wg sync.WaitGroup
	var healthyErr, badErr error
	wg.Go(func() {
		healthyErr = emit(ctx, env.admin, emission{
			tenant: benchTenant, eventType: healthyEventType, events: o.healthyEvents(),
			every: o.healthyEvery(), workers: o.emitters,
		}, healthyLoad)
	})
	if during := o.badDeliveries - before; withBad && during > 0 {
		wg.Go(func() {
			badErr = emit(ctx, env.admin, emission{
				tenant: benchTenant, eventType: badEventType, events: during,
				every: o.duration / time.Duration(during), workers: o.emitters,
			}, badLoad)
		})
	}
	wg.Wait()
	if err := errors.Join(healthyErr, badErr); err != nil {
		return nil, err
	}
	b.stepf("  healthy stream done (%d deliveries); waiting up to %s for them to finish", len(healthyLoad.deliveries), o.settle)

	res.healthy, err = awaitHealthy(ctx, env, endpoints, subIDs, healthyLoad, o.settle)
	if err != nil {
		return nil, err
	}
	used := resourcesNow()
	res.wall, res.cpu = used.at.Sub(env.usage0.at), used.cpu-env.usage0.cpu
	res.peakRSS = peakRSS()
	res.redisCPU = env.redisCPU(ctx)
	stopSampling()
	res.peakAckPending, res.heapPeak, res.timeline = <-peakAck, <-heapPeak, <-timeline
	if withBad {
		if res.bad, err = badResults(ctx, env, bad, badLoad); err != nil {
			return nil, err
		}
	}
	res.waiting, res.heapWaiting = waitingMemory(ctx, env)
	res.warnings = env.logs.warnings()
	return res, nil
}

// waitingMemory counts the work waiting in the dispatch stream and the heap
// this process (jetrelay and its embedded NATS server) keeps in use after a
// GC with it waiting.
func waitingMemory(ctx context.Context, env *benchEnv) (queue.Waiting, uint64) {
	w, _ := queue.CountWaiting(ctx, env.stack.JetStream(), queue.Config{Stream: env.cfg.Stream, Subject: env.cfg.Subject, Consumer: env.cfg.Consumer})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return w, ms.HeapInuse
}

func settingsOf(env *benchEnv) engineSettings {
	c := env.cfg
	inflight := c.MaxInFlight
	if inflight <= 0 || inflight > c.Workers {
		inflight = c.Workers // no bound but the pool, the engine's default
	}
	return engineSettings{
		workers: c.Workers, minWorkers: min(c.MinWorkers, c.Workers), maxInFlight: inflight, breakerThreshold: c.BreakerThreshold, maxAckPending: c.MaxAckPending,
		breakerOpen: c.BreakerOpenFor, breakerMaxOpen: c.BreakerMaxOpenFor, parkAfter: c.ParkAfter, ackWait: c.AckWait,
		connectTimeout: setting(c.Getenv(webhook.SettingConnectTimeout)), requestTimeout: setting(c.Getenv(webhook.SettingRequestTimeout)),
	}
}

// setting parses a duration setting config.Load has already checked.
func setting(v string) time.Duration {
	d, _ := time.ParseDuration(v)
	return d
}

// startBadEndpoints creates the dead, black-hole and slow endpoints and
// their subscriptions, with admin's defaults (retry policy, auto-disable
// after 10 failed deliveries), as a customer would create them.
func startBadEndpoints(ctx context.Context, env *benchEnv, o *isolationOptions) ([]*badSub, error) {
	deadAddr, err := receiver.ClosedAddr()
	if err != nil {
		return nil, err
	}
	hole, err := env.blackHole()
	if err != nil {
		return nil, err
	}
	slow := &slowEndpoint{delay: o.slowDelay}
	slowAddr, err := env.serve(slow)
	if err != nil {
		return nil, err
	}
	subs := []*badSub{
		{name: "dead", behaviour: "connection refused", url: "http://" + deadAddr + "/dead",
			saw: func() string { return "— (nothing listens)" }},
		{name: "black hole", behaviour: "accepts, never answers", url: "http://" + hole.addr() + "/hole",
			saw: func() string { return fmt.Sprintf("%d connections", hole.connections()) }},
		{name: "slow", behaviour: fmt.Sprintf("answers 200 after %s", o.slowDelay), url: "http://" + slowAddr + "/slow",
			saw: func() string {
				r, a := slow.counts()
				return fmt.Sprintf("%d requests, %d answered", r, a)
			}},
	}
	for _, s := range subs {
		if s.id, _, err = env.admin.CreateSubscription(ctx, admin.Subscription{
			TenantID: benchTenant, Name: "bench " + s.name, URL: s.url, EventTypes: []string{badEventType},
		}); err != nil {
			return nil, err
		}
	}
	return subs, nil
}

// awaitHealthy waits until every healthy delivery is SUCCESS (or settle
// passes) and measures them; subIDs[i] is endpoints[i]'s subscription.
func awaitHealthy(ctx context.Context, env *benchEnv, endpoints []*receiver.Endpoint, subIDs []string, load *emitted, settle time.Duration) (healthyResult, error) {
	h := healthyResult{expected: len(load.deliveries), emitLag: load.maxLag}
	deadline := time.Now().Add(settle)
	var recs []*proto.Delivery
	for {
		var err error
		if recs, err = deliveryRecords(ctx, env.adminDB, load.deliveries); err != nil {
			return h, err
		}
		h.succeeded = 0
		for _, d := range recs {
			if d.Status == proto.DeliverySuccess {
				h.succeeded++
			}
		}
		if h.succeeded == h.expected || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return h, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	h.complete = h.succeeded == h.expected
	var last time.Time
	for _, d := range recs {
		if d.Status == proto.DeliverySuccess && d.CompletedAt != nil && d.CompletedAt.After(last) {
			last = d.CompletedAt.Time
		}
	}
	if h.span = last.Sub(load.first); h.span > 0 {
		h.throughput = float64(h.succeeded) / h.span.Seconds()
	}

	var lat []time.Duration
	for i, ep := range endpoints {
		seen := map[string]bool{}
		for _, d := range ep.Deliveries() {
			if seen[d.EventID] || d.Status != 200 {
				continue
			}
			t0, ok := load.enqueued[admin.DeliveryID(d.EventID, subIDs[i])]
			if !ok {
				// Every healthy receipt is of a delivery this phase
				// enqueued: one without its enqueue time is a bench fault.
				return h, fmt.Errorf("healthy receipt of event %s for %s has no enqueue time", d.EventID, subIDs[i])
			}
			seen[d.EventID] = true
			lat = append(lat, d.At.Sub(t0))
			h.received = append(h.received, healthyLatency{enqueued: t0, latency: d.At.Sub(t0)})
		}
	}
	slices.Sort(lat)
	h.p50, h.p95, h.p99 = percentile(lat, 0.50), percentile(lat, 0.95), percentile(lat, 0.99)
	if len(lat) > 0 {
		h.max = lat[len(lat)-1]
	}
	return h, nil
}

// healthyLatency is when a healthy delivery was enqueued and how long it
// took from then to reach its receiver.
type healthyLatency struct {
	enqueued time.Time
	latency  time.Duration
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// badResults reads what became of the bad subscriptions' deliveries.
func badResults(ctx context.Context, env *benchEnv, subs []*badSub, load *emitted) ([]badResult, error) {
	bySub := map[string][]string{}
	recs, err := deliveryRecords(ctx, env.adminDB, load.deliveries)
	if err != nil {
		return nil, err
	}
	out := make([]badResult, len(subs))
	for i, s := range subs {
		out[i] = badResult{name: s.name, behaviour: s.behaviour, endpointSaw: s.saw(), byStatus: map[proto.DeliveryStatus]int{}}
	}
	for _, d := range recs {
		i := slices.IndexFunc(subs, func(s *badSub) bool { return s.id == d.SubscriptionID })
		if i < 0 {
			continue
		}
		out[i].queued++
		out[i].sends += d.Attempts
		out[i].byStatus[d.Status]++
		bySub[d.SubscriptionID] = append(bySub[d.SubscriptionID], d.DeliveryID)
	}
	for i, s := range subs {
		if out[i].parkedNow, err = parked(ctx, env.adminDB, bySub[s.id]); err != nil {
			return nil, err
		}
		out[i].parkedPutOffs = env.logs.reasons(s.id, "delivery put off")
		out[i].failedAttempts = env.logs.count(s.id, "delivery attempt failed; retry scheduled", "") + env.logs.count(s.id, "delivery failed", "")
		out[i].subStatus = "?"
		if raw, err := env.adminDB.Get(ctx, store.SubscriptionKey(s.id)).Bytes(); err == nil {
			if sub, err := proto.ParseSubscription(raw); err == nil {
				out[i].subStatus = fmt.Sprintf("%s, consecutive_failures %d", sub.Status, sub.ConsecutiveFailures)
			}
		}
	}
	return out, nil
}

// sampleHeap reports the largest Go heap in use seen until ctx ends.
func sampleHeap(ctx context.Context, every time.Duration) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-ctx.Done():
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
}

// pool says how the worker pool was set: elastic from its floor to its cap,
// or fixed.
func (s engineSettings) pool() string {
	if s.minWorkers > 0 && s.minWorkers < s.workers {
		return fmt.Sprintf("a worker pool growing from %d to %d workers", s.minWorkers, s.workers)
	}
	return fmt.Sprintf("a fixed pool of %d workers", s.workers)
}
