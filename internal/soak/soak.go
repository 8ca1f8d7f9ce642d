package soak

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/freeport"
	"github.com/jetrelay/jetrelay/internal/redisproc"
	"github.com/jetrelay/jetrelay/proto"
)

// Config is one soak run. The zero value (but for Seed) is a short run.
type Config struct {
	// Seed draws the fault plan, the endpoints' modes and the pacing.
	Seed uint64
	// Duration is the fault phase (default 30s); settlement follows.
	Duration time.Duration
	// Settle bounds the wait for every delivery to become final once the
	// faults stop (default 90s).
	Settle time.Duration
	// Dir holds the servers' data and the processes' logs; empty means a
	// temporary directory removed at the end.
	Dir string
	// Binaries are built into Dir when empty.
	Binaries Binaries
	// EventsPerSecond is the cluster keyspace's event rate (default 6);
	// each event fans out to every subscription. The embedded process gets
	// half of it.
	EventsPerSecond float64
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = 30 * time.Second
	}
	if c.Settle <= 0 {
		c.Settle = 90 * time.Second
	}
	if c.EventsPerSecond <= 0 {
		c.EventsPerSecond = 6
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// Subscriptions per keyspace: the cluster's and the embedded process's.
const (
	clusterSubscriptions  = 4
	embeddedSubscriptions = 2
	tenant                = "tenant-soak"
	eventType             = "budget.exhausted"
)

// keyspace is one Redis database with its subscriptions, writer and the
// jetrelay processes that serve it.
type keyspace struct {
	name    string
	rdb     *redis.Client
	writer  *admin.Writer
	eps     []*endpoint
	env     map[string]string // REDIS_URL and where JetStream is
	natsURL string            // for the harness's own reads of the stream
	relays  []*relay
	rate    float64

	gate     sync.RWMutex // emits hold it shared; a handback check exclusively
	mu       sync.Mutex
	ids      []string
	emitErrs int
}

// soak is one run in progress.
type soak struct {
	cfg    Config
	plan   Plan
	dir    string
	bins   Binaries
	keyB64 string
	redis  *redisproc.Server
	nats   *natsCluster
	recv   *receivers
	spaces []*keyspace // cluster, embedded
	rep    *Report
	start  time.Time

	wmu     sync.Mutex
	windows []window
}

// window is when a disruptive fault was in effect.
type window struct{ from, to time.Time }

// Run runs one soak and returns what it found. An error means the harness
// could not run (a server that does not start); the checks' findings are
// in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	s := &soak{cfg: cfg, dir: cfg.Dir, bins: cfg.Binaries,
		rep: &Report{Seed: cfg.Seed, Duration: cfg.Duration, Faults: map[Kind]int{}}}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "jetrelay-soak-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		s.dir = dir
	}
	if s.bins.Jetrelay == "" {
		b, err := Build(ctx, s.dir)
		if err != nil {
			return nil, err
		}
		s.bins = b
	}
	defer s.teardown()
	if err := s.setup(ctx); err != nil {
		return s.rep, err
	}
	s.plan = NewPlan(cfg.Seed, cfg.Duration, len(s.spaces[0].eps)+len(s.spaces[1].eps))
	if err := s.soak(ctx); err != nil {
		return s.rep, err
	}
	return s.rep, s.check(ctx)
}

func (s *soak) logf(format string, args ...any) {
	s.cfg.Logf("[%6.1fs] "+format, append([]any{time.Since(s.start).Seconds()}, args...)...)
}

func (s *soak) setup(ctx context.Context) error {
	s.start = time.Now()
	raw := make([]byte, 32)
	rand.Read(raw)
	s.keyB64 = base64.StdEncoding.EncodeToString(raw)
	key, err := proto.ParseSecretKey(s.keyB64)
	if err != nil {
		return err
	}
	if s.redis, err = redisproc.Start(ctx, redisproc.Options{Dir: filepath.Join(s.dir, "redis"), AppendOnly: true, FsyncAlways: true}); err != nil {
		return fmt.Errorf("soak: redis-server: %w", err)
	}
	natsDir := filepath.Join(s.dir, "nats")
	if err := os.MkdirAll(natsDir, 0o755); err != nil {
		return err
	}
	if s.nats, err = startNATSCluster(ctx, s.bins.NATSServer, natsDir, 3); err != nil {
		return err
	}
	if s.recv, err = startReceivers(); err != nil {
		return err
	}
	ports, err := freeport.Take(1)
	if err != nil {
		return err
	}
	embeddedNATS := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cluster := &keyspace{name: "cluster", rate: s.cfg.EventsPerSecond, natsURL: s.nats.URLs(), env: map[string]string{
		"REDIS_URL": s.redis.URL() + "/0", "NATS_URL": s.nats.URLs(), "JETRELAY_STREAM_REPLICAS": "3",
	}}
	embedded := &keyspace{name: "embedded", rate: s.cfg.EventsPerSecond / 2, natsURL: "nats://" + embeddedNATS, env: map[string]string{
		"REDIS_URL": s.redis.URL() + "/1", "JETRELAY_DATA_DIR": filepath.Join(s.dir, "embedded"), "JETRELAY_NATS_LISTEN": embeddedNATS,
	}}
	s.spaces = []*keyspace{cluster, embedded}
	for i, sp := range s.spaces {
		sp.rdb = redis.NewClient(&redis.Options{Addr: s.redis.Addr(), DB: i, MaxRetries: -1})
		sp.writer = admin.NewWriter(sp.rdb, key)
		n := clusterSubscriptions
		if sp == embedded {
			n = embeddedSubscriptions
		}
		for j := range n {
			if err := s.subscribe(ctx, sp, fmt.Sprintf("/%s/%d", sp.name, j)); err != nil {
				return err
			}
		}
	}
	env := relayEnv(s.keyB64)
	for _, r := range []struct {
		name, role string
		sp         *keyspace
	}{
		{"replica-1", "all", cluster}, {"replica-2", "engine", cluster}, {"bridge", "bridge", cluster},
		{"embedded", "all", embedded},
	} {
		rl, err := newRelay(s.bins.Jetrelay, r.name, r.role, r.sp, env)
		if err != nil {
			return err
		}
		rl.proc.logFile = filepath.Join(s.dir, r.name+".log")
		r.sp.relays = append(r.sp.relays, rl)
		if err := rl.start(ctx); err != nil {
			return err
		}
	}
	s.logf("started: redis-server (appendfsync always), 3 nats-server nodes, %d jetrelay processes, %d endpoints",
		len(cluster.relays)+len(embedded.relays), len(cluster.eps)+len(embedded.eps))
	return nil
}

// subscribe creates a subscription as admin does, with a short retry
// policy so a run of minutes sees many schedules end.
func (s *soak) subscribe(ctx context.Context, sp *keyspace, path string) error {
	retries, initial, mult, maxDelay := 3, int64(500), 2.0, int64(4000)
	id, secret, err := sp.writer.CreateSubscription(ctx, admin.Subscription{
		TenantID: tenant, Name: "soak " + path, URL: s.recv.base + path, EventTypes: []string{eventType},
		RetryPolicy: &proto.RetryPolicy{MaxRetries: &retries, InitialDelayMs: &initial, BackoffMultiplier: &mult, MaxDelayMs: &maxDelay},
	})
	if err != nil {
		return fmt.Errorf("soak: create subscription: %w", err)
	}
	ep, err := s.recv.add(path, id, secret)
	if err != nil {
		return err
	}
	sp.eps = append(sp.eps, ep)
	return nil
}

func (s *soak) teardown() {
	for _, sp := range s.spaces {
		for _, r := range sp.relays {
			r.proc.stop(syscall.SIGKILL, 10*time.Second)
		}
	}
	if s.recv != nil {
		s.recv.close()
	}
	if s.nats != nil {
		s.nats.stop()
	}
	for _, sp := range s.spaces {
		if sp.rdb != nil {
			sp.rdb.Close()
		}
	}
	if s.redis != nil {
		s.redis.Stop()
	}
}

// soak runs the load, the endpoints' modes and the faults for the fault
// phase, then brings everything back to health and waits for settlement.
func (s *soak) soak(ctx context.Context) error {
	s.start = time.Now()
	// The counters are watched through settlement too.
	watching, stopWatching := context.WithCancel(ctx)
	var watcher sync.WaitGroup
	watcher.Go(func() { s.watchCounters(watching) })
	defer func() {
		stopWatching()
		watcher.Wait()
	}()

	phase, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, sp := range s.spaces {
		wg.Go(func() { s.load(phase, sp) })
	}
	wg.Go(func() { s.modes(phase) })
	err := s.faults(phase)
	stop()
	wg.Wait()
	if err != nil {
		return err
	}
	return s.settle(ctx)
}

// load emits events at the keyspace's rate as admin does, never cancelled
// mid-flight so every id admin wrote is kept. An emit that fails (Redis
// down) is counted; whatever it wrote is found by the final scan.
func (s *soak) load(ctx context.Context, sp *keyspace) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / sp.rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sp.gate.RLock()
		ectx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, ids, err := sp.writer.Emit(ectx, admin.Event{
			EventType: eventType, TenantID: tenant, Scope: "tenant:" + tenant, Source: "cycles-server",
			Data: []byte(`{"ledger_id":"led_1","remaining":0}`), TraceID: proto.NewTraceID(),
		}, admin.TraceSnapshot{})
		cancel()
		sp.gate.RUnlock()
		sp.mu.Lock()
		sp.ids = append(sp.ids, ids...)
		if err != nil {
			sp.emitErrs++
		}
		sp.mu.Unlock()
	}
}

// modes applies the plan's endpoint modes on time.
func (s *soak) modes(ctx context.Context) {
	var eps []*endpoint
	for _, sp := range s.spaces {
		eps = append(eps, sp.eps...)
	}
	for _, m := range s.plan.Modes {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(s.start.Add(m.At))):
		}
		eps[m.Endpoint].mode.Store(int32(m.Mode))
	}
}

// watchCounters samples every subscription's consecutive_failures, which
// must never pass its disable_after_failures.
func (s *soak) watchCounters(ctx context.Context) {
	flagged := map[string]bool{}
	for {
		for _, sp := range s.spaces {
			for _, ep := range sp.eps {
				s.checkCounter(ctx, sp, ep.subID, flagged)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (s *soak) checkCounter(ctx context.Context, sp *keyspace, subID string, flagged map[string]bool) {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	raw, err := sp.rdb.Get(rctx, "webhook:"+subID).Bytes()
	if err != nil {
		return // Redis down or restarting: the next sample sees it
	}
	sub, err := proto.ParseSubscription(raw)
	if err != nil {
		return
	}
	limit := proto.DefaultDisableAfterFailures
	if sub.DisableAfterFailures != nil {
		limit = *sub.DisableAfterFailures
	}
	s.rep.mu.Lock()
	s.rep.MaxConsecutive = max(s.rep.MaxConsecutive, sub.ConsecutiveFailures)
	s.rep.mu.Unlock()
	if sub.ConsecutiveFailures > limit && !flagged[subID] {
		flagged[subID] = true
		s.rep.violate(CheckConsecutive, subID, "consecutive_failures "+strconv.Itoa(sub.ConsecutiveFailures)+" past disable_after_failures "+strconv.Itoa(limit))
	}
}

// settle ends the faults' effects: every process running, endpoints
// healthy, the load stopped, every subscription ACTIVE; then it waits until
// every delivery is final or the deadline passes.
func (s *soak) settle(ctx context.Context) error {
	s.recv.setAll(ModeHealthy)
	if !s.redis.Running() {
		s.logf("settling: redis-server is not running; starting it")
		if err := s.redis.Restart(ctx); err != nil {
			return err
		}
	}
	for _, sp := range s.spaces {
		if err := awaitRedis(ctx, sp.rdb, redisPatience); err != nil {
			return fmt.Errorf("soak: redis-server did not answer while settling: %w", err)
		}
	}
	for _, n := range s.nats.nodes {
		if !n.proc.running() {
			if err := n.proc.start(); err != nil {
				return err
			}
		}
	}
	for _, sp := range s.spaces {
		for _, r := range sp.relays {
			if !r.proc.running() {
				if err := r.start(ctx); err != nil {
					return err
				}
			}
		}
		for _, ep := range sp.eps {
			// A failure is retried by the loop below, as its own are.
			if _, err := s.activate(ctx, sp, ep.subID); err != nil {
				s.logf("settling: re-enabling %s: %v", ep.subID, err)
			}
		}
	}
	settleStart := time.Now()
	s.logf("faults over; settling (up to %s)", s.cfg.Settle)
	deadline := settleStart.Add(s.cfg.Settle)
	for {
		// An operator re-enables what the engine disables while the
		// endpoints are healthy; how often that was needed is reported.
		for _, sp := range s.spaces {
			for _, ep := range sp.eps {
				changed, err := s.activate(ctx, sp, ep.subID)
				if err != nil {
					// Redis answered before this loop began; a failure
					// now is transient and the deadline still bounds
					// the wait, so it is retried on the next pass.
					s.logf("settling: re-enabling %s: %v", ep.subID, err)
					continue
				}
				if changed {
					s.rep.Reenabled++
					s.logf("settling: %s was not ACTIVE again; re-enabled", ep.subID)
				}
			}
		}
		open, err := s.unsettled(ctx)
		if err == nil && open == 0 {
			break
		}
		if time.Now().After(deadline) {
			s.logf("settle deadline: %d deliveries not final (%v)", open, err)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	s.rep.Settled = time.Since(settleStart)
	return nil
}

// redisPatience is how long settlement waits for Redis to answer after the
// last fault: a restarted redis-server loads its AOF first, and a client
// whose dials failed while it was down keeps returning the last dial error
// until its pool's own probe (once a second) reaches the server again. The
// pool turns to that once PoolSize dials have failed, counted across every
// outage of the run, so long runs meet it and the 20 s CI runs seldom do.
const redisPatience = 30 * time.Second

// awaitRedis waits until rdb answers a PING, for at most patience.
func awaitRedis(ctx context.Context, rdb *redis.Client, patience time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	var last error
	for {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if ctx.Err() == nil || last == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer in %s: %w", patience, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// activate sets a subscription ACTIVE as admin's PATCH does, unless it is;
// changed says whether it was not.
func (s *soak) activate(ctx context.Context, sp *keyspace, subID string) (changed bool, err error) {
	raw, err := sp.rdb.Get(ctx, "webhook:"+subID).Bytes()
	if err != nil {
		return false, err
	}
	sub, err := proto.ParseSubscription(raw)
	if err != nil {
		return false, err
	}
	if sub.Status == proto.SubscriptionActive {
		return false, nil
	}
	return true, sp.writer.SetStatus(ctx, subID, proto.SubscriptionActive)
}
