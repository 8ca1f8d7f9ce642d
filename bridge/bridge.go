package bridge

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

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
)

// readyTimeout bounds each of Ready's checks.
const readyTimeout = 2 * time.Second

// ErrAlreadyRunning is returned by Run when the same Bridge is already running.
var ErrAlreadyRunning = errors.New("bridge: already running")

// Bridge moves delivery ids from Redis into the JetStream dispatch stream.
// Create it with New; Run it once at a time.
type Bridge struct {
	js     jetstream.JetStream
	store  *store.Store
	cfg    Config
	log    *slog.Logger
	tracer trace.Tracer // nil when tracing is off

	processingKey string
	// drained: the last move came back short of a batch, so the next one
	// waits for ids (move.go). Only the dispatch loop touches it.
	drained bool
	// toRemove are ids published since the last move, still in the
	// processing list: the next move removes them in its round trip
	// (move.go). Only the dispatch loop touches it.
	toRemove []string
	// caughtUp tells the keeper's loop (keeper.go) that the last move
	// emptied dispatch:pending and what it moved is published.
	caughtUp atomic.Bool

	running atomic.Bool
	// problem is the last error that stalled the bridge, cleared when it
	// makes progress again; Ready reports it.
	problem atomic.Pointer[error]

	moved, published, duplicates, requeued, recovered, adopted, promoted, undeferred, quarantined, parked, unparked atomic.Uint64

	routes routing // ordered subscriptions (route.go)
	holds  holding // intake holds (park.go)
}

// New checks cfg and returns a Bridge working on the Redis behind rdb (any
// go-redis v9 client: *redis.Client, *redis.ClusterClient, …). js should be
// created with jetstream.WithPublishAsyncTimeout so that a PubAck lost
// without a disconnect frees its async-publish slot; the bridge retries such
// ids itself after Config.PublishTimeout.
func New(rdb store.Client, js jetstream.JetStream, cfg Config) (*Bridge, error) {
	if rdb == nil || js == nil {
		return nil, errors.New("bridge: Redis client and JetStream are required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var tracer trace.Tracer
	if cfg.TracerProvider != nil {
		tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	return &Bridge{
		tracer:        tracer,
		js:            js,
		store:         store.New(rdb),
		cfg:           cfg,
		log:           cfg.Logger.With("component", "bridge", "instance_id", cfg.InstanceID),
		processingKey: store.ProcessingList(cfg.InstanceID),
	}, nil
}

// Run moves ids until ctx is done, then returns nil. Transient failures of
// Redis or JetStream never end it: it backs off and retries, and Ready
// reports the problem meanwhile. It first republishes whatever this instance
// left in its processing list. On shutdown it finishes the batch in hand;
// anything it could not publish stays in the processing list for the next
// Run (or for another bridge to adopt), so no id is lost.
func (b *Bridge) Run(ctx context.Context) error {
	if !b.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer b.running.Store(false)

	b.log.Info("bridge starting", "processing_list", b.processingKey, "stream", b.cfg.Queue.Stream)
	if err := b.beat(ctx); err != nil {
		b.log.Warn("heartbeat not written yet; retrying in the background", "err", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { b.heartbeatLoop(ctx) })
	wg.Go(func() { b.promoteLoop(ctx) })
	wg.Go(func() { b.keepLoop(ctx) })
	b.dispatchLoop(ctx)
	wg.Wait()

	// Dropping the heartbeat lets a live bridge adopt anything left behind
	// now rather than after HeartbeatTTL.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	b.dropTurn(dctx)
	if err := b.store.StopBeating(dctx, b.cfg.InstanceID); err != nil {
		b.log.Warn("heartbeat not removed; it expires on its own", "err", err)
	}
	b.log.Info("bridge stopped")
	return nil
}

// dispatchLoop is the bridge's one sequential worker: recovery, adoption
// and moving all touch this instance's processing list, so they take turns.
func (b *Bridge) dispatchLoop(ctx context.Context) {
	var bo backoff
	for ctx.Err() == nil {
		if _, err := queue.EnsureStream(ctx, b.js, b.cfg.Queue); err != nil {
			if ctx.Err() != nil {
				return
			}
			b.stalled(err)
			d := bo.step()
			b.log.Warn("dispatch stream not available; retrying", "err", err, "retry_in", d)
			sleep(ctx, d)
			continue
		}
		break
	}
	bo.reset()

	// needDrain is set whenever the processing list may hold ids we do not
	// hold in memory: at start-up, after adopting, and after a move whose
	// reply was lost (the server may have moved ids we never saw).
	needDrain := true
	var nextAdopt time.Time
	// Ids published and not yet removed are removed on the way out, so a
	// restart does not republish them (the duplicate window would absorb
	// them, but the next start would read and publish each again).
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := b.removePublished(rctx); err != nil {
			b.log.Warn("published ids not removed from the processing list; the next start republishes them, as duplicates", "ids", len(b.toRemove), "err", err)
		}
	}()
	for ctx.Err() == nil {
		if needDrain {
			err := b.removePublished(ctx)
			if err == nil {
				err = b.drain(ctx)
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				b.stalled(err)
				d := bo.step()
				b.log.Warn("processing list recovery failed; retrying", "err", err, "retry_in", d)
				sleep(ctx, d)
				continue
			}
			needDrain = false
		}
		if now := time.Now(); !now.Before(nextAdopt) && b.removePublished(ctx) == nil {
			n, err := b.adoptOrphans(ctx)
			if err != nil && ctx.Err() == nil {
				b.log.Warn("orphan scan failed; retrying next period", "err", err)
			}
			// Scanning at a third of the TTL bounds how long a dead
			// bridge's ids wait: TTL plus a third, not two TTLs.
			nextAdopt = now.Add(b.cfg.HeartbeatTTL / 3)
			if n > 0 {
				needDrain = true
				continue
			}
		}
		if ok, adopted := b.takeTurn(ctx); !ok {
			// Another bridge moves while a subscription is ordered: what
			// this one published leaves its list now, not at its next move.
			if err := b.removePublished(ctx); err != nil && ctx.Err() == nil {
				b.log.Warn("published ids not removed from the processing list; retrying", "ids", len(b.toRemove), "err", err)
			}
			sleep(ctx, moverRetry)
			continue
		} else if adopted {
			needDrain = true
			continue
		}
		ids, origins, err := b.move(ctx)
		settled := len(ids) == 0 || b.settle(ctx, ids, origins, false)
		b.caughtUp.Store(b.drained && settled && err == nil)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			needDrain = true
			b.stalled(err)
			d := bo.step()
			b.log.Warn("moving from dispatch:pending failed; retrying", "err", err, "retry_in", d)
			sleep(ctx, d)
			continue
		}
		bo.reset()
		b.progressed()
	}
}

// stalled records err for Ready.
func (b *Bridge) stalled(err error) { b.problem.Store(&err) }

// progressed clears the problem Ready reports.
func (b *Bridge) progressed() { b.problem.Store(nil) }

// Stats counts what a Bridge has done since New.
type Stats struct {
	// Moved is ids moved from dispatch:pending into the processing list.
	Moved uint64
	// Published is ids JetStream stored as new messages.
	Published uint64
	// Duplicates is publishes JetStream absorbed and the bridge dropped:
	// the original message is still queued, or it was consumed and the
	// delivery record is final or gone.
	Duplicates uint64
	// Requeued is ids pushed again after their earlier message was
	// consumed, while the record still asks for delivery: JetStream would
	// have absorbed them, so they were republished under a derived msg id
	// (queue.RequeueMsgID).
	Requeued uint64
	// Recovered is ids republished from the processing list (this
	// instance's leftovers and adopted ones).
	Recovered uint64
	// Adopted is ids taken over from dead instances' processing lists.
	Adopted uint64
	// Promoted is ids promoted from the legacy dispatch:retry ZSET.
	Promoted uint64
	// Undeferred is deliveries an older jetrelay left parked in
	// jetrelay:deferred, moved into dispatch:pending once at start-up.
	Undeferred uint64
	// Quarantined is malformed ids moved to dispatch:failed.
	Quarantined uint64
	// Parked is ids left in Redis for a subscription under an intake hold
	// (park.go); Unparked is parked ids put back into dispatch:pending.
	Parked, Unparked uint64
}

// Stats returns the counters. It is safe to call while Run runs.
func (b *Bridge) Stats() Stats {
	return Stats{
		Moved:       b.moved.Load(),
		Published:   b.published.Load(),
		Duplicates:  b.duplicates.Load(),
		Requeued:    b.requeued.Load(),
		Recovered:   b.recovered.Load(),
		Adopted:     b.adopted.Load(),
		Promoted:    b.promoted.Load(),
		Undeferred:  b.undeferred.Load(),
		Quarantined: b.quarantined.Load(),
		Parked:      b.parked.Load(),
		Unparked:    b.unparked.Load(),
	}
}

// Ready returns nil when Redis answers, the dispatch stream answers, and the
// bridge is not stalled on an error; otherwise it says what is wrong.
// Each check gives up after 2s, so a probe answers quickly even when ctx
// has no deadline and a server hangs.
func (b *Bridge) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var errs []error
	if err := b.store.Ping(ctx); err != nil {
		errs = append(errs, fmt.Errorf("redis: %w", err))
	}
	if nc := b.js.Conn(); !nc.IsConnected() {
		errs = append(errs, fmt.Errorf("jetstream: nats connection is %s", nc.Status()))
	} else if _, err := b.js.Stream(ctx, b.cfg.Queue.Stream); err != nil {
		errs = append(errs, fmt.Errorf("jetstream stream %s: %w", b.cfg.Queue.Stream, err))
	}
	if p := b.problem.Load(); p != nil {
		errs = append(errs, fmt.Errorf("stalled: %w", *p))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bridge not ready: %w", err)
	}
	return nil
}
