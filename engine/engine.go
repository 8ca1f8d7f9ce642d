package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jetrelay/jetrelay/internal/groupcommit"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// Config tunes an Engine. Zero values take the defaults in withDefaults.
type Config struct {
	Queue QueueConfig
	// Workers bounds the worker pool: the most deliveries one replica
	// handles at once, default DefaultWorkers. The pool grows from
	// MinWorkers toward it while work is held back and the CPU and memory
	// allow (workers.go).
	Workers int
	// MinWorkers is the pool's floor and first size, default
	// DefaultMinWorkers (at most Workers). Past four times it the pool
	// grows only while its workers spend at least half their time sending
	// (workers.go). MinWorkers = Workers is a fixed pool.
	MinWorkers int
	// MemoryBudget bounds what the pool grows into, in bytes: it stops
	// growing at three quarters of it, shrinks above it, and never runs more
	// workers than half of it holds at perSendBytes each. 0: GOMEMLIMIT,
	// else three quarters of the cgroup's memory limit, else 1 GiB;
	// negative: no budget.
	MemoryBudget   int64
	MaxDeliveryAge time.Duration    // stale cutoff, default 24h (MAX_DELIVERY_AGE_MS)
	EventTTL       time.Duration    // TTL of the webhook.disabled event, default 90 days
	SecretKey      *proto.SecretKey // decrypts enc: secrets; nil means none configured
	DrainTimeout   time.Duration    // how long in-flight work may finish on shutdown, default 25s
	AttemptTimeout time.Duration    // upper bound of one send, default 45s (transports have their own, shorter, timeouts)
	InfraRetryMin  time.Duration    // first delay after an infrastructure error, default 1s
	InfraRetryMax  time.Duration    // cap of that delay, default 30s
	MaxRetryAfter  time.Duration    // cap on a receiver's Retry-After, default 1h
	SuccessFlush   time.Duration    // coalescing period of subscription success bookkeeping, default 1s
	Logger         *slog.Logger
	Observer       Observer // told of every decision (metrics); nil: nobody
	// NoAutoPipeline sends each delivery's Redis reads and writes as one
	// pipeline per call instead of sharing round trips with other workers
	// through go-redis's autopipeliner (JETRELAY_REDIS_AUTOPIPELINE=false).
	NoAutoPipeline bool
	// TracerProvider makes the spans of attempts and sends; nil: no spans.
	TracerProvider trace.TracerProvider
	// AllowUnsigned sends a delivery whose subscription has no (or a
	// blank) signing secret unsigned, as upstream did before 0.1.25.24;
	// false (the default) fails it without a send, as 0.1.25.24 does.
	AllowUnsigned bool
	// StandardWebhooks signs deliveries with Standard Webhooks headers too
	// (beside X-Cycles-Signature) for subscriptions whose own setting does
	// not say otherwise (JETRELAY_STANDARD_WEBHOOKS).
	StandardWebhooks bool
	// SecretRotationGrace is how long a replaced signing secret keeps
	// signing Standard Webhooks deliveries beside the new one, default 24h
	// (JETRELAY_SECRET_ROTATION_GRACE).
	SecretRotationGrace time.Duration

	// Isolation: one endpoint must not slow the others.
	Breaker         BreakerConfig
	MaxInFlight     int           // upper bound of a subscription's adaptive in-flight limit per replica; 0: none but Workers
	BusyWaitMin     time.Duration // shortest written put-off (or ordered line's wait) of a delivery whose subscription is at its in-flight limit, default 1s; a fast subscription's short busy wait (a delayed nak) is not bound by it
	ParkAfter       time.Duration // retry waits, and a fast subscription's busy waits, up to this long stay a delayed nak; longer ones, and every other put-off, become JetStream message schedules. Default 1s
	InactivePolicy  string        // InactiveDefer (default) or InactiveFail: what a PAUSED/DISABLED subscription does to its deliveries
	InactiveRecheck time.Duration // period of the held-check of a subscription holding deliveries: how soon a re-enabled subscription's deliveries are released. Default 5s

	// Ordering is the fleet default ordering of subscriptions whose own
	// setting names none (JETRELAY_ORDERING; ordered.go).
	Ordering proto.Ordering
	// LineFailingAfter is how long an ordered line's consumer may fail to
	// be created or pulled before Ready reports the replica not ready,
	// naming the subscription (linehealth.go). Default
	// DefaultLineFailingAfter.
	LineFailingAfter time.Duration
	// NoIntakeHolds keeps this replica from writing intake holds
	// (intakehold.go): every delivery of a subscription whose breaker is
	// open or whose sends hang then still comes through the queue, to be
	// held or put off there.
	NoIntakeHolds bool
}

// fastAnswer: a subscription whose sends take less than this on average
// frees a slot within moments, so it may use every worker, and at its
// in-flight limit a worker waits for it (this long at most) instead of
// putting the delivery off.
const fastAnswer = 100 * time.Millisecond

// DefaultWorkers bounds how many deliveries one replica works on at once
// unless Config.Workers says otherwise: thousands of goroutines waiting on
// slow receivers are cheap, and the pool only grows that far while work
// is held back and the CPU and the memory budget allow.
const DefaultWorkers = 4096

// DefaultMinWorkers is the worker pool's floor unless Config.MinWorkers
// says otherwise: what a fast receiver needs (more goroutines only
// contend for the CPU; docs/operations.md).
const DefaultMinWorkers = 64

// Inactive policies.
const (
	// InactiveDefer holds a paused or disabled subscription's deliveries
	// until it is ACTIVE again or they go stale (DESIGN decision 8).
	InactiveDefer = "defer"
	// InactiveFail fails them at once, as the reference service does
	// ("Subscription not active: PAUSED").
	InactiveFail = "fail"
)

func (c Config) withDefaults() Config {
	c.Queue = c.Queue.WithDefaults()
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.MinWorkers <= 0 {
		c.MinWorkers = DefaultMinWorkers
	}
	c.MinWorkers = min(c.MinWorkers, c.Workers)
	if c.MemoryBudget == 0 {
		c.MemoryBudget = defaultMemoryBudget()
	}
	if c.MaxDeliveryAge <= 0 {
		c.MaxDeliveryAge = 24 * time.Hour
	}
	if c.EventTTL <= 0 {
		c.EventTTL = 90 * 24 * time.Hour
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 25 * time.Second
	}
	if c.AttemptTimeout <= 0 {
		// About half of AckWait (capped): a send in flight is kept alive,
		// so this bounds how long one unanswered request holds a worker.
		c.AttemptTimeout = min(45*time.Second, c.Queue.AckWait/2+5*time.Second)
	}
	if c.InfraRetryMin <= 0 {
		c.InfraRetryMin = time.Second
	}
	if c.InfraRetryMax <= 0 {
		c.InfraRetryMax = 30 * time.Second
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = time.Hour
	}
	if c.SecretRotationGrace <= 0 {
		c.SecretRotationGrace = DefaultSecretRotationGrace
	}
	if c.SuccessFlush <= 0 {
		c.SuccessFlush = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.TracerProvider == nil {
		c.TracerProvider = noop.NewTracerProvider()
	}
	c.Breaker = c.Breaker.withDefaults()
	if c.MaxInFlight <= 0 || c.MaxInFlight > c.Workers {
		c.MaxInFlight = c.Workers
	}
	if c.BusyWaitMin <= 0 {
		c.BusyWaitMin = time.Second
	}
	if c.ParkAfter <= 0 {
		c.ParkAfter = time.Second
	}
	if c.InactivePolicy == "" {
		c.InactivePolicy = InactiveDefer
	}
	if c.LineFailingAfter <= 0 {
		c.LineFailingAfter = DefaultLineFailingAfter
	}
	if c.InactiveRecheck <= 0 {
		// One Redis read per held subscription per period: cheap, and an
		// operator who re-enables a subscription sees it deliver within
		// seconds.
		c.InactiveRecheck = 5 * time.Second
	}
	return c
}

// Engine consumes work items and delivers them. Create it with New.
type Engine struct {
	cfg   Config
	store *store.Store
	js    jetstream.JetStream
	// stream is the dispatch stream's handle once dispatchStream got it.
	stream    atomic.Pointer[jetstream.Stream]
	transport *transport.Registry
	log       *slog.Logger
	obs       Observer
	tracer    trace.Tracer
	successes *successLedger
	breakers  *breakers
	inflight  *inflight
	workers   *workers
	busy      *busyLines                      // deliveries parked while their subscription is at its limit here
	putOffs   *groupcommit.Committer[*putOff] // put-offs written in bulk (putoffs.go)
	checks    *checkReads                     // shared reads of pending held-checks (checkreads.go)
	intake    *intakeHolds                    // the intake holds this replica wrote (intakehold.go)
	shortBusy *shortNaks                      // budget of fast subscriptions' busy waits as delayed naks (wait.go)
	alive     *keepAlive
	lineAlive *keepAlive            // items of ordered lines, whose AckWait is short (ordered.go)
	taken     [2]atomic.Uint64      // work items handed to the workers, by lane (WorkStats)
	problem   atomic.Pointer[error] // why the consumer is not open, nil while it is

	// lineFaults are the ordered lines that cannot be pulled (linehealth.go).
	lineFaults lineFaults
}

// New returns an engine that reads and writes the Cycles records in the
// Redis behind rdb (any go-redis v9 client: *redis.Client,
// *redis.ClusterClient, …), consumes from js and sends through the
// transports in reg (transport.OpenRegistry, or a Registry filled by hand).
func New(rdb store.Client, js jetstream.JetStream, reg *transport.Registry, cfg Config) (*Engine, error) {
	if rdb == nil || js == nil || reg == nil {
		return nil, errors.New("engine: Redis client, JetStream and transport registry are required")
	}
	cfg = cfg.withDefaults()
	st := store.NewWithOptions(rdb, store.Options{AutoPipeline: !cfg.NoAutoPipeline})
	e := &Engine{cfg: cfg, store: st, js: js, transport: reg, log: cfg.Logger, obs: cfg.Observer,
		tracer: cfg.TracerProvider.Tracer(tracerName)}
	if cfg.InactivePolicy != InactiveDefer && cfg.InactivePolicy != InactiveFail {
		return nil, fmt.Errorf("engine: inactive policy must be %q or %q, got %q", InactiveDefer, InactiveFail, cfg.InactivePolicy)
	}
	e.successes = newSuccessLedger(e)
	e.breakers = newBreakers(cfg.Breaker)
	e.intake = newIntakeHolds(e)
	e.breakers.onTrip = e.intake.renew
	e.workers = newWorkers(cfg.MinWorkers, cfg.Workers, cfg.MemoryBudget)
	e.inflight = newInflight(e.workers, cfg.MaxInFlight, fastAnswer)
	e.busy = newBusyLines(cfg.Queue.MaxAckPending, e.inflight.pool.Room)
	e.putOffs = newPutOffs(e)
	e.checks = newCheckReads(e.readPendingCheck, e.log)
	e.shortBusy = &shortNaks{window: cfg.ParkAfter, most: max(1, cfg.Queue.MaxAckPending/parkShare)}
	e.inflight.freed = e.busy.freed
	e.alive = newKeepAlive(cfg.Queue.AckWait / 4)
	e.lineAlive = newKeepAlive(queue.OrderedAckWait / 4)
	return e, nil
}

// Run consumes until ctx is done, then drains: it stops fetching, releases
// work it has not started, lets in-flight deliveries finish for up to
// DrainTimeout, releases whatever is still running after that, and returns.
// Losing the consumer (deleted, JetStream unavailable) is not fatal: Run
// recreates it with backoff and reports the problem through Ready meanwhile.
func (e *Engine) Run(ctx context.Context) error {
	// Workers run on their own context: cancelling ctx stops fetching, but a
	// send in flight is given DrainTimeout to finish before it is cut off.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()

	flushDone := make(chan struct{})
	go func() { defer close(flushDone); e.successes.run(workCtx) }()
	aliveDone := make(chan struct{})
	go func() { defer close(aliveDone); e.alive.run(workCtx) }()
	lineAliveDone := make(chan struct{})
	go func() { defer close(lineAliveDone); e.lineAlive.run(workCtx) }()

	work := newSizedLanes(min(e.workers.most, maxBuffer), e.workers.buffer)
	work.woken = e.busy.woken
	busyDone := make(chan struct{})
	go func() { defer close(busyDone); e.busy.run(ctx) }()
	intakeDone := make(chan struct{})
	go func() { defer close(intakeDone); e.intake.run(ctx) }()
	f := newSizedFetched(min(e.workers.most, maxBuffer), e.workers.buffer)
	var wg sync.WaitGroup
	spawn := e.runWorkers(ctx, workCtx, work, &wg)
	sized := make(chan struct{})
	go func() { defer close(sized); e.sizeWorkers(ctx, work, f, spawn) }()

	linesDone := make(chan struct{})
	go func() { defer close(linesDone); e.runLines(ctx, work) }()
	e.consume(ctx, work, f)
	<-linesDone
	<-busyDone // parked items released; none parks after this
	<-intakeDone
	<-sized // no worker starts after this
	work.close()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(e.cfg.DrainTimeout):
		e.log.Warn("drain timeout: releasing in-flight deliveries", "timeout", e.cfg.DrainTimeout)
		cancelWork()
		<-done
	}
	cancelWork()
	<-flushDone
	<-aliveDone
	<-lineAliveDone
	// Last coalesced success timestamps, bounded so shutdown stays bounded.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	e.successes.flush(fctx)
	return nil
}

// consume feeds work from the durable consumer until ctx is done, opening
// the consumer again whenever a fetch fails in a way that needs it (see
// fetch.go for why the engine fetches rather than iterates).
func (e *Engine) consume(ctx context.Context, work *lanes, f *fetched) {
	fed := make(chan struct{})
	go func() { defer close(fed); e.feed(ctx, f, work) }()
	defer func() { close(f.items); <-fed }()
	backoff := minReopen
	for ctx.Err() == nil {
		cons, err := e.open(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.problem.Store(&err)
			e.log.Error("cannot open the JetStream consumer; retrying", "err", err, "retry_in", backoff)
			sleep(ctx, backoff)
			backoff = min(2*backoff, maxReopen)
			continue
		}
		e.problem.Store(nil)
		backoff = minReopen
		err = e.pull(ctx, cons, f)
		if ctx.Err() == nil {
			err = fmt.Errorf("engine: fetching from the consumer: %w; reopening", err)
			e.problem.Store(&err)
			e.log.Error("lost the JetStream consumer; reopening it", "err", err, "retry_in", backoff)
			sleep(ctx, backoff)
		}
	}
}

const (
	minReopen = 200 * time.Millisecond
	maxReopen = 5 * time.Second
)

// open ensures the stream and the durable consumer.
func (e *Engine) open(ctx context.Context) (jetstream.Consumer, error) {
	if _, err := queue.EnsureStream(ctx, e.js, e.cfg.Queue); err != nil {
		return nil, err
	}
	return queue.EnsureConsumer(ctx, e.js, e.cfg.Queue)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Ready reports whether the engine can work: its consumer is open, and
// Redis and JetStream both answer.
func (e *Engine) Ready(ctx context.Context) error {
	if p := e.problem.Load(); p != nil {
		return *p
	}
	if err := e.linesProblem(); err != nil {
		return err
	}
	if err := e.store.Ping(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if _, err := e.js.Consumer(ctx, e.cfg.Queue.Stream, e.cfg.Queue.Consumer); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	return nil
}

// release gives a message back for immediate redelivery.
func release(m jetstream.Msg) { _ = m.Nak() }

// dispatchStream is a handle on the dispatch stream for reading stored
// messages (held copies, held-checks). It is looked up once: the lookup is
// a stream info request, which the server answers by computing the
// stream's state, and holding a backlog for an open breaker read the
// pending held-check for every delivery it held. The handle names the
// stream, so it stays good if the stream is made again.
func (e *Engine) dispatchStream(ctx context.Context) (jetstream.Stream, error) {
	if st := e.stream.Load(); st != nil {
		return *st, nil
	}
	st, err := e.js.Stream(ctx, e.cfg.Queue.Stream)
	if err != nil {
		return nil, err
	}
	e.stream.Store(&st)
	return st, nil
}
