package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/sjson"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// perfRun carries what every case of the performance scenario shares.
type perfRun struct {
	b *benchContext
	o *perfOptions
}

// Kinds of result: the two references and jetrelay itself.
const (
	kindCeiling   = "ceiling"
	kindReference = "reference"
	kindJetrelay  = "jetrelay"
)

// perfResult is what one case measured.
type perfResult struct {
	id, title, kind     string
	expected, succeeded int
	throughput          float64       // deliveries (or POSTs) per second
	span                time.Duration // what the throughput is measured over
	latency             bool          // p50… are meaningful
	p50, p95, p99, max  time.Duration // enqueue → receipt
	emitP50, emitP99    time.Duration // the same from the start of admin's Emit
	cpu, redisCPU, wall time.Duration // this process's and redis-server's CPU over wall
	peakRSS             int64
	rssLifetime         bool  // VmHWM could not be reset: the process's lifetime peak
	redisReads          int64 // reads redis-server processed in the window (its round trips, every client's); -1 unknown
	child               bool  // jetrelay ran as a separate process: peakRSS is its, cpu its plus this process's
	rssFile             int64 // a separate process's file-backed resident set (its binary's pages) at the end
	replicas, workers   int
	minWorkers          int     // the elastic pool's floor (0: not jetrelay's pool); below workers, the pool grew from it toward workers
	enqueueRate         float64 // deliveries/s admin wrote, 0 when not measured
	receiptRate         float64 // deliveries/s between the receiver's first and last receipt: the steady rate, without start-up
	emitLag             time.Duration
	eventBytes          int
	note                string
	profile             *profileSummary
	// The healthy subscriptions' put-offs by reason, and the engines'
	// parks (every subscription's), over the case's environment, setup
	// included; nil for a jetrelay in its own process, whose logs the bench
	// does not read.
	putOffs map[string]int
	parks   *engine.ParkStats
	// sendWaits is the time before each send by stage, from the engines'
	// histograms; nil for a jetrelay in its own process.
	sendWaits *sendWaits
	// cpuWaitSelf and cpuWaitRedis are how long this process's threads and
	// redis-server waited for a CPU while runnable over the window; not ok
	// for a jetrelay in its own process (the sink's process is not it).
	cpuWaitSelf, cpuWaitRedis cpuWait
}

func (r *perfResult) line() string {
	s := fmt.Sprintf("%d/%d delivered, %.0f/s", r.succeeded, r.expected, r.throughput)
	if r.latency {
		s += fmt.Sprintf(", latency p50 %s p95 %s p99 %s", ms(r.p50), ms(r.p95), ms(r.p99))
		if r.emitP99 > 0 {
			s += fmt.Sprintf(" (from Emit's start: p50 %s p99 %s)", ms(r.emitP50), ms(r.emitP99))
		}
	}
	if r.latency && r.sendWaits != nil && r.sendWaits.queue.n() > 0 {
		s += "; before each send: " + r.sendWaits.line()
	}
	s += fmt.Sprintf(", CPU %.2f cores (+ redis %.2f), peak RSS %.0f MiB", r.cores(), r.redisCores(), float64(r.peakRSS)/(1<<20))
	if r.child {
		s += " (the jetrelay process)"
	}
	if w := r.cpuWaits(); w != "" {
		s += "; waited for a CPU: " + w
	}
	if r.parks != nil {
		s += "; put off: " + r.waits()
	}
	return s
}

// waits says how often the case's healthy deliveries were put off (short
// delayed naks included), by reason, and how often the engine parked a
// delivery of any subscription, spilled or expired; "not counted" for a
// jetrelay in its own process. Both cover the case's whole environment,
// its setup included.
func (r *perfResult) waits() string {
	if r.parks == nil {
		return "not counted"
	}
	return fmt.Sprintf("%s; %d parks (%d spilled, %d expired)", reasonList(r.putOffs), r.parks.Parks, r.parks.Spills, r.parks.Expired)
}

// cpuWaits says how long this process's threads and redis-server waited
// for a CPU while runnable, "" when it was not read.
func (r *perfResult) cpuWaits() string {
	var parts []string
	if r.cpuWaitSelf.ok {
		parts = append(parts, r.cpuWaitSelf.phrase("this process's threads", r.wall))
	}
	if r.cpuWaitRedis.ok {
		parts = append(parts, r.cpuWaitRedis.phrase("redis-server", r.wall))
	}
	return strings.Join(parts, ", ")
}

func (r *perfResult) cores() float64      { return r.cpu.Seconds() / max(r.wall.Seconds(), 1e-9) }
func (r *perfResult) redisCores() float64 { return r.redisCPU.Seconds() / max(r.wall.Seconds(), 1e-9) }

// layout is how a case's subscriptions are spread: tenants × subsPerTenant
// healthy ones (every event of a tenant goes to each of its subscriptions)
// and dead ones spread over the tenants.
type layout struct{ tenants, subsPerTenant, dead int }

// fastLayout gives every subscription its own tenant, so each event is one
// delivery.
func (p *perfRun) fastLayout() layout { return layout{tenants: p.o.subs, subsPerTenant: 1} }

// fleet is a case's subscriptions and the sink behind the healthy ones.
type fleet struct {
	sink          *sink
	tenants       []string
	urls, secrets []string          // of the healthy subscriptions
	healthy       map[string]bool   // subscription id → healthy
	subOf         map[string]string // receiver path → healthy subscription id
	perEvent      int               // healthy deliveries per event
}

// newFleet creates the subscriptions as a customer would through admin,
// with admin's defaults. Healthy endpoints share listeners, a hundred paths
// each, as many subscriptions of one customer share a host.
func (p *perfRun) newFleet(ctx context.Context, env *benchEnv, l layout, delay time.Duration) (*fleet, error) {
	f := &fleet{sink: newSink(delay), healthy: map[string]bool{}, subOf: map[string]string{}, perEvent: l.subsPerTenant}
	total := l.tenants * l.subsPerTenant
	var addrs, dead []string
	for range max(1, (total+99)/100) {
		addr, err := env.serve(f.sink)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	for range min(l.dead, 10) {
		addr, err := receiver.ClosedAddr()
		if err != nil {
			return nil, err
		}
		dead = append(dead, addr)
	}
	create := func(tenant, path, url string) (string, string, error) {
		return env.admin.CreateSubscription(ctx, admin.Subscription{TenantID: tenant, Name: "bench " + path[1:], URL: url, EventTypes: []string{healthyEventType}})
	}
	for t := range l.tenants {
		tenant := fmt.Sprintf("bench-%03d", t+1)
		f.tenants = append(f.tenants, tenant)
		for range l.subsPerTenant {
			n := len(f.urls)
			path := fmt.Sprintf("/s-%05d", n+1)
			url := "http://" + addrs[n%len(addrs)] + path
			id, secret, err := create(tenant, path, url)
			if err != nil {
				return nil, err
			}
			f.sink.expect(path, secret)
			f.urls, f.secrets = append(f.urls, url), append(f.secrets, secret)
			f.healthy[id], f.subOf[path] = true, id
		}
	}
	for i := range l.dead {
		path := fmt.Sprintf("/dead-%05d", i+1)
		if _, _, err := create(f.tenants[i%len(f.tenants)], path, "http://"+dead[i%len(dead)]+path); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// eventData is a budget.exhausted payload padded so the stored event is
// about size bytes (the envelope admin adds is about 420 bytes).
func eventData(size int) json.RawMessage {
	base := `{"ledger_id":"led_bench","unit":"TOKENS","allocated":10000,"remaining":0,"spent":10000,"memo":"`
	pad := max(0, size-420-len(base)-2)
	return json.RawMessage(base + strings.Repeat("x", pad) + `"}`)
}

// freshMemory returns freed memory to the OS and starts a new peak RSS
// measurement, so a case's peak is its own and not an earlier case's. It
// reports whether the peak could be reset.
func freshMemory() bool {
	runtime.GC()
	debug.FreeOSMemory()
	return resetPeakRSS()
}

// e2eCase is one end-to-end case: admin writes, jetrelay delivers, the sink
// receives.
type e2eCase struct {
	id, title string
	layout    layout
	delay     time.Duration     // the sink's answer time
	events    int               // events emitted (each is layout.subsPerTenant healthy deliveries)
	every     time.Duration     // between two events; 0: as fast as admin's writers go
	rate      float64           // the fixed rate, for the report
	replicas  int               // 0 or 1: one
	tcp       bool              // replicas reach NATS over TCP
	prequeue  bool              // queue everything, then start jetrelay as a separate process (`run`) and measure that
	settings  map[string]string // JETRELAY_* overrides
	// beside, if set, runs once jetrelay is ready, before the measured
	// load: other work the case is measured next to. after then runs at
	// the end of the measurement; what it returns is the case's note.
	beside func(ctx context.Context, env *benchEnv) error
	after  func(ctx context.Context, env *benchEnv) (string, error)
}

func (p *perfRun) e2e(ctx context.Context, c e2eCase) (*perfResult, error) {
	p.b.stepf("%s", c.title)
	opts := envOptions{settings: c.settings, encrypt: true, replicas: c.replicas, tcp: c.tcp, held: true}
	if c.prequeue {
		bin, err := relayBinary(p.o.relayBinary)
		if err != nil {
			return nil, err
		}
		opts.child = bin
	}
	env, err := startBenchEnv(ctx, p.b, opts)
	if err != nil {
		return nil, err
	}
	defer env.close()
	f, err := p.newFleet(ctx, env, c.layout, c.delay)
	if err != nil {
		return nil, err
	}
	res := &perfResult{id: c.id, title: c.title, kind: kindJetrelay, replicas: max(1, c.replicas), workers: env.cfg.Workers,
		minWorkers: min(env.cfg.MinWorkers, env.cfg.Workers), expected: c.events * f.perEvent, latency: !c.prequeue}
	writer, emitters := env.admin, p.o.emitters
	if c.every > 0 {
		// A fixed rate needs no batching from the writers, and a batch
		// would add its wait to the enqueue script's round trip, which the
		// latency counts.
		writer, emitters = env.direct, p.o.rateEmitters
	}
	spec := emission{tenants: f.tenants, eventType: healthyEventType, events: c.events, every: c.every, workers: emitters, data: eventData(p.o.eventBytes)}
	load := newEmitted()

	var (
		lifetime bool // the in-process peak could not be reset
		u0       resources
		r0       time.Duration
		reads0   int64
		prof     *cpuProfile
		t0       time.Time
		emitDone = make(chan error, 1)
		emitEnd  time.Time
		redisPID int
		w0self   cpuWait
		w0redis  cpuWait
	)
	if c.prequeue {
		if err := emit(ctx, writer, spec, load); err != nil {
			return nil, err
		}
		emitEnd = time.Now()
		p.b.stepf("  queued %d deliveries in %s; starting `%s run` as a separate process", len(load.deliveries), emitEnd.Sub(load.first).Round(time.Millisecond), opts.child)
		// The child's peak and CPU are its own from its start; this
		// process (the sink) is not profiled, its CPU is added.
		u0, r0, prof = resourcesNow(), env.redisCPU(ctx), &cpuProfile{}
		reads0 = env.redisReads(ctx)
		t0 = u0.at
		if err := env.start(ctx); err != nil {
			return nil, err
		}
		emitDone <- nil
	} else {
		if err := env.start(ctx); err != nil {
			return nil, err
		}
		if err := awaitReady(ctx, env); err != nil {
			return nil, err
		}
		if c.beside != nil {
			if err := c.beside(ctx, env); err != nil {
				return nil, err
			}
		}
		lifetime = !freshMemory()
		redisPID = env.redisPID(ctx) // before reads0: the window counts its own INFO calls
		reads0 = env.redisReads(ctx)
		w0self, w0redis = cpuWaitOf(os.Getpid()), cpuWaitOf(redisPID)
		u0, r0, prof = resourcesNow(), env.redisCPU(ctx), startCaseProfile()
		go func() {
			err := emit(ctx, writer, spec, load)
			emitEnd = time.Now()
			emitDone <- err
		}()
	}
	profiling := true
	defer func() {
		if profiling {
			prof.stop()
		}
	}()

	// Wait for the sink to have every healthy delivery; the CPU and memory
	// window closes then, before the records are read back.
	deadline := time.Now().Add(p.o.settle)
	emitting := true
	for f.sink.accepted() < res.expected && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-env.childExited():
			return nil, env.child.exitError()
		case err := <-emitDone:
			if err != nil {
				return nil, err
			}
			emitting = false
		case <-time.After(20 * time.Millisecond):
		}
	}
	u1, r1 := resourcesNow(), env.redisCPU(ctx)
	if !c.prequeue {
		res.cpuWaitSelf, res.cpuWaitRedis = cpuWaitOf(os.Getpid()).since(w0self), cpuWaitOf(redisPID).since(w0redis)
	}
	res.redisReads = -1
	if reads1 := env.redisReads(ctx); reads0 >= 0 && reads1 >= reads0 {
		// Less this window's own INFO calls: the CPU's twice, then these.
		res.redisReads = reads1 - reads0 - 3
	}
	res.profile, profiling = prof.stop(), false
	p.b.keepProfile(c.title, prof)
	res.cpu, res.wall, res.redisCPU = u1.cpu-u0.cpu, u1.at.Sub(u0.at), r1-r0
	if env.stack != nil {
		res.putOffs = map[string]int{}
		for sub := range f.healthy {
			for reason, n := range env.logs.reasons(sub, "delivery put off") {
				res.putOffs[reason] += n
			}
		}
		res.parks = &engine.ParkStats{}
		if res.sendWaits, err = readSendWaits(append([]*app.Stack{env.stack}, env.replica...)); err != nil {
			return nil, err
		}
		for _, st := range append([]*app.Stack{env.stack}, env.replica...) {
			ps := st.Engine().ParkStats()
			res.parks.Parked += ps.Parked
			res.parks.Parks += ps.Parks
			res.parks.Spills += ps.Spills
			res.parks.Expired += ps.Expired
		}
	}
	if c.after != nil {
		if res.note, err = c.after(ctx, env); err != nil {
			return nil, err
		}
	}
	if env.child != nil {
		u, err := env.child.usage()
		if err != nil {
			select {
			case <-env.childExited():
				return nil, env.child.exitError()
			default:
				return nil, fmt.Errorf("reading the jetrelay process's usage: %w", err)
			}
		}
		res.child, res.cpu, res.peakRSS, res.rssFile = true, res.cpu+u.cpu, u.peakRSS, u.rssFile
	} else {
		res.peakRSS, res.rssLifetime = peakRSS(), lifetime
	}
	if emitting {
		if err := <-emitDone; err != nil {
			return nil, err
		}
	}
	if !c.prequeue {
		t0 = load.first
		if span := emitEnd.Sub(load.first); span > 0 {
			res.enqueueRate = float64(len(load.deliveries)) / span.Seconds()
		}
		res.emitLag = load.maxLag
	}
	if res.eventBytes, err = storedEventSize(ctx, env, load); err != nil {
		return nil, err
	}

	last, err := awaitSuccess(ctx, env, load.deliveries, f.healthy, res, deadline)
	if err != nil {
		return nil, err
	}
	if res.span = last.Sub(t0); res.span > 0 {
		res.throughput = float64(res.succeeded) / res.span.Seconds()
	}
	if res.latency {
		lat := make([]time.Duration, 0, res.expected)
		fromEmit := make([]time.Duration, 0, res.expected)
		var first, last time.Time
		receipts := f.sink.receipts()
		for _, r := range receipts {
			if at, ok := load.enqueued[admin.DeliveryID(r.eventID, f.subOf[r.path])]; ok {
				lat = append(lat, r.at.Sub(at))
			}
			if at, ok := load.at[r.eventID]; ok {
				fromEmit = append(fromEmit, r.at.Sub(at))
			}
			if first.IsZero() || r.at.Before(first) {
				first = r.at
			}
			if r.at.After(last) {
				last = r.at
			}
		}
		// Every receipt is of a delivery this case enqueued: one without
		// its enqueue time is a bench fault, not a figure to leave out.
		if len(lat) != len(receipts) {
			return nil, fmt.Errorf("%s: %d of %d receipts have no enqueue time", c.title, len(receipts)-len(lat), len(receipts))
		}
		res.setLatency(lat)
		slices.Sort(fromEmit)
		res.emitP50, res.emitP99 = percentile(fromEmit, 0.50), percentile(fromEmit, 0.99)
		if n := len(lat); n > 1 && last.After(first) {
			res.receiptRate = float64(n-1) / last.Sub(first).Seconds()
		}
	}
	if res.child {
		res.note = "jetrelay ran as a separate process (`jetrelay run`, embedded JetStream) started after the queue was built; " +
			"peak RSS is that process's VmHWM, CPU is its user + system time plus this process's (the receivers')"
		if c.tcp {
			res.note = "jetrelay ran as a separate process (`jetrelay run`) started after the queue was built, reaching a JetStream server in the bench process over loopback TCP; " +
				"peak RSS is that process's VmHWM, CPU is its user + system time plus this process's (the receivers' and the JetStream server's)"
		}
	}
	if c.layout.dead > 0 {
		res.note = fmt.Sprintf("%d more deliveries went to the dead endpoints (retrying, parked or failed; not counted)", c.events*c.layout.dead)
	}
	return res, nil
}

func (r *perfResult) setLatency(lat []time.Duration) {
	slices.Sort(lat)
	r.p50, r.p95, r.p99 = percentile(lat, 0.50), percentile(lat, 0.95), percentile(lat, 0.99)
	if len(lat) > 0 {
		r.max = lat[len(lat)-1]
	}
}

// awaitReady waits until every replica's engine has its consumer, so a
// case's clock starts with jetrelay running, not starting.
func awaitReady(ctx context.Context, env *benchEnv) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range append([]*app.Stack{env.stack}, env.replica...) {
		for s.Engine().Ready(ctx) != nil {
			if time.Now().After(deadline) {
				return errors.New("jetrelay did not become ready within 30s")
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// awaitSuccess reads the delivery records until every healthy one is
// SUCCESS (or deadline passes), sets res.succeeded and returns the latest
// completed_at.
func awaitSuccess(ctx context.Context, env *benchEnv, ids []string, healthy map[string]bool, res *perfResult, deadline time.Time) (time.Time, error) {
	for {
		recs, err := deliveryRecords(ctx, env.adminDB, ids)
		if err != nil {
			return time.Time{}, err
		}
		var last time.Time
		res.succeeded = 0
		for _, d := range recs {
			if healthy[d.SubscriptionID] && d.Status == proto.DeliverySuccess && d.CompletedAt != nil {
				res.succeeded++
				if d.CompletedAt.After(last) {
					last = d.CompletedAt.Time
				}
			}
		}
		if res.succeeded >= res.expected || time.Now().After(deadline) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// storedEventSize is the size of one event as admin stored it.
func storedEventSize(ctx context.Context, env *benchEnv, load *emitted) (int, error) {
	for id := range load.at {
		n, err := env.adminDB.StrLen(ctx, store.EventKey(id)).Result()
		return int(n), err
	}
	return 0, nil
}

// ceiling measures the most this machine POSTs with jetrelay's own HTTP
// client (the engine's webhook transport, SSRF guard included) to the same
// sink: as many workers as the engine has, each sending signed 1 KB events
// back to back, with no queue in between.
func (p *perfRun) ceiling(ctx context.Context) (*perfResult, error) {
	p.b.stepf("ceiling: %s of POSTs, no queue", p.o.ceilingFor)
	env, err := startBenchEnv(ctx, p.b, envOptions{encrypt: true, held: true})
	if err != nil {
		return nil, err
	}
	defer env.close()
	f, err := p.newFleet(ctx, env, p.fastLayout(), 0)
	if err != nil {
		return nil, err
	}
	// A real stored event is the body, as the engine would send it.
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
	workers := env.cfg.MinWorkers // as many POSTers as a fast receiver gets
	res := &perfResult{id: "ceiling", title: fmt.Sprintf("ceiling: %d workers POSTing, no queue", workers), kind: kindCeiling,
		replicas: 1, workers: workers, latency: true, eventBytes: len(body)}
	lifetime := !freshMemory()
	u0, r0, prof := resourcesNow(), env.redisCPU(ctx), startCaseProfile()
	deadline := u0.at.Add(p.o.ceilingFor)
	lats := make([][]time.Duration, workers)
	fails := make([]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { lats[w], fails[w] = ceilingWorker(ctx, env.stack.Webhook(), f, body, w, workers, deadline) })
	}
	wg.Wait()
	u1, r1 := resourcesNow(), env.redisCPU(ctx)
	res.profile = prof.stop()
	p.b.keepProfile(res.title, prof)
	res.peakRSS, res.rssLifetime = peakRSS(), lifetime
	res.cpu, res.wall, res.redisCPU, res.span = u1.cpu-u0.cpu, u1.at.Sub(u0.at), r1-r0, u1.at.Sub(u0.at)
	var all []time.Duration
	for w := range workers {
		all = append(all, lats[w]...)
		res.expected += len(lats[w]) + fails[w]
	}
	res.succeeded = len(all)
	res.throughput = float64(res.succeeded) / res.span.Seconds()
	res.setLatency(all)
	if n := f.sink.accepted(); n != res.succeeded {
		res.note = fmt.Sprintf("the sink accepted %d", n)
	}
	return res, nil
}

// ceilingWorker POSTs until deadline and returns the round trip of each
// accepted request and how many were not accepted.
func ceilingWorker(ctx context.Context, tr transport.Transport, f *fleet, body []byte, id, workers int, deadline time.Time) ([]time.Duration, int) {
	var lat []time.Duration
	fails := 0
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		k := (id + i*workers) % len(f.urls)
		traceID := proto.NewTraceID()
		r, err := tr.Deliver(ctx, &transport.Request{
			URL: f.urls[k], Body: body, EventID: fmt.Sprintf("evt_ceiling_%d_%d", id, i), EventType: healthyEventType,
			Signature: proto.Sign(f.secrets[k], body), TraceID: traceID, Traceparent: proto.BuildTraceparent(traceID, traceID[:16], "01"), Attempt: 1,
		})
		if err != nil || r.Outcome != transport.Delivered {
			fails++
			continue
		}
		lat = append(lat, r.Latency)
	}
	return lat, fails
}

// reference runs the Cycles events service's dispatch algorithm (contract
// §6.1–6.7) as a Go loop over n queued deliveries, with the same HTTP client
// and sink as jetrelay, and measures it the same way.
func (p *perfRun) reference(ctx context.Context, id, title string, delay time.Duration, n int) (*perfResult, error) {
	p.b.stepf("%s: %d deliveries, one at a time", title, n)
	env, err := startBenchEnv(ctx, p.b, envOptions{encrypt: true, held: true})
	if err != nil {
		return nil, err
	}
	defer env.close()
	f, err := p.newFleet(ctx, env, p.fastLayout(), delay)
	if err != nil {
		return nil, err
	}
	load := newEmitted()
	if err := emit(ctx, env.admin, emission{tenants: f.tenants, eventType: healthyEventType, events: n, workers: p.o.emitters, data: eventData(p.o.eventBytes)}, load); err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: env.redis.Addr(), PoolSize: 2})
	defer rdb.Close()
	res := &perfResult{id: id, title: title, kind: kindReference, replicas: 1, workers: 1, expected: n}
	if res.eventBytes, err = storedEventSize(ctx, env, load); err != nil {
		return nil, err
	}
	lifetime := !freshMemory()
	u0, r0, prof := resourcesNow(), env.redisCPU(ctx), startCaseProfile()
	succeeded, last, err := runReferenceLoop(ctx, rdb, env.stack.Webhook(), env.key, n)
	u1, r1 := resourcesNow(), env.redisCPU(ctx)
	res.profile = prof.stop()
	p.b.keepProfile(title, prof)
	if err != nil {
		return nil, err
	}
	res.peakRSS, res.rssLifetime = peakRSS(), lifetime
	res.cpu, res.wall, res.redisCPU = u1.cpu-u0.cpu, u1.at.Sub(u0.at), r1-r0
	res.succeeded = succeeded
	if res.span = last.Sub(u0.at); res.span > 0 {
		res.throughput = float64(succeeded) / res.span.Seconds()
	}
	res.note = "deliveries queued before the loop starts; its rate excludes admin's writes"
	return res, nil
}

// runReferenceLoop is DispatchLoop.processNext and DeliveryHandler.handle
// of the reference service, one delivery at a time: BRPOP, GET delivery,
// GET event, GET subscription, GET secret (and decrypt), POST, TTL + SET
// delivery, GET + SET subscription. Only the success path is exercised (the
// sink answers 200); a failed send is counted and the loop goes on. It
// stops after n deliveries or when the queue stays empty for BRPOP's
// timeout, and returns the successes and when the last one was written.
func runReferenceLoop(ctx context.Context, rdb *redis.Client, tr transport.Transport, key *proto.SecretKey, n int) (int, time.Time, error) {
	var last time.Time
	ok := 0
	for range n {
		kv, err := rdb.BRPop(ctx, 5*time.Second, "dispatch:pending").Result()
		if errors.Is(err, redis.Nil) {
			break
		}
		if err != nil {
			return ok, last, err
		}
		id := kv[1]
		raw, err := rdb.Get(ctx, store.DeliveryKey(id)).Bytes()
		if err != nil {
			continue
		}
		d, err := proto.ParseDelivery(raw)
		if err != nil || (d.Status != proto.DeliveryPending && d.Status != proto.DeliveryRetrying) {
			continue
		}
		evRaw, err := rdb.Get(ctx, store.EventKey(d.EventID)).Bytes()
		if err != nil {
			continue
		}
		ev, err := proto.ParseEvent(evRaw)
		if err != nil {
			continue
		}
		subRaw, err := rdb.Get(ctx, store.SubscriptionKey(d.SubscriptionID)).Bytes()
		if err != nil {
			continue
		}
		sub, err := proto.ParseSubscription(subRaw)
		if err != nil || sub.Status != proto.SubscriptionActive {
			continue
		}
		secret := ""
		if stored, err := rdb.Get(ctx, store.SecretKey(d.SubscriptionID)).Result(); err == nil {
			secret, _ = key.Decrypt(stored)
		}
		d.Attempts++
		if d.TraceID == "" {
			d.TraceID = ev.TraceID
		}
		sig := ""
		if secret != "" {
			sig = proto.Sign(secret, evRaw)
		}
		r, err := tr.Deliver(ctx, &transport.Request{
			URL: sub.URL, Body: evRaw, EventID: ev.EventID, EventType: ev.EventType, Signature: sig, TraceID: d.TraceID,
			Traceparent: proto.BuildTraceparent(d.TraceID, proto.NewTraceID()[:16], "01"), Headers: sub.Headers,
			DeliveryID: d.DeliveryID, SubscriptionID: d.SubscriptionID, Attempt: d.Attempts,
		})
		if err != nil || r.Outcome != transport.Delivered {
			continue
		}
		now := time.Now().UTC()
		status, took := r.StatusCode, r.Latency.Milliseconds()
		d.Status, d.ResponseStatus, d.ResponseTimeMs, d.CompletedAt = proto.DeliverySuccess, &status, &took, &proto.Instant{Time: now}
		out, err := json.Marshal(d)
		if err != nil {
			return ok, last, err
		}
		dk := store.DeliveryKey(id)
		// The reference keeps the record's TTL (none when it has none).
		var ttl time.Duration
		if left, err := rdb.TTL(ctx, dk).Result(); err == nil && left > 0 {
			ttl = left
		}
		if err := rdb.Set(ctx, dk, out, ttl).Err(); err != nil {
			return ok, last, err
		}
		// updateDeliveryState: GET, merge four fields, SET (no CAS).
		if cur, err := rdb.Get(ctx, store.SubscriptionKey(sub.SubscriptionID)).Bytes(); err == nil {
			ts := proto.FormatInstant(now)
			cur, _ = sjson.SetBytes(cur, "consecutive_failures", 0)
			cur, _ = sjson.SetBytes(cur, "last_triggered_at", ts)
			cur, _ = sjson.SetBytes(cur, "last_success_at", ts)
			if err := rdb.Set(ctx, store.SubscriptionKey(sub.SubscriptionID), cur, 0).Err(); err != nil {
				return ok, last, err
			}
		}
		ok++
		last = time.Now()
	}
	return ok, last, nil
}
