package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/metrics"
	"github.com/jetrelay/jetrelay/internal/mgmt"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/reconcile"
	"github.com/jetrelay/jetrelay/internal/retention"
	"github.com/jetrelay/jetrelay/internal/ssrf"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/telemetry"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/natsink"
)

// Stack is one running jetrelay: its connections and the parts its role runs.
type Stack struct {
	log       *slog.Logger
	rdb       *redis.Client
	embedded  *natsserver.Server
	nc        *nats.Conn // bridge and natsink
	js        jetstream.JetStream
	engineNC  *nats.Conn // engine: pulls, acks, in-progress signals
	engineJS  jetstream.JetStream
	bridge    *bridge.Bridge
	reconcile *reconcile.Reconciler // nil unless this process runs the bridge
	engine    *engine.Engine
	registry  *transport.Registry // every compiled-in transport (http(s), nats, sqs, …)
	guard     *ssrf.Guard         // nil unless this process runs the engine
	ssrfEvery time.Duration       // how often the guard re-reads its policy
	retention *retention.Config   // nil unless this process runs the bridge
	queue     queue.Config        // the dispatch stream, subject and consumer
	metrics   *metrics.Metrics    // served on /metrics
	tracing   *telemetry.Tracing  // OTLP spans, a no-op without OTEL_EXPORTER_OTLP_*ENDPOINT
}

// New connects to Redis and NATS (starting an embedded JetStream server
// when no NATS_URL is set) and builds the parts cfg.Role asks for. version
// labels metrics and traces. The caller runs it with Run and releases it
// with Close.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, version string) (_ *Stack, err error) {
	// The deferred close must see the stack even when a failing return
	// hands the caller nil, so s is not the named result.
	s := &Stack{log: log, metrics: metrics.New(metrics.Options{TenantTag: cfg.MetricsTenantTag, Version: version})}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	if s.tracing, err = telemetry.New(ctx, os.Getenv, version); err != nil {
		return nil, err
	}
	if s.tracing.Enabled() {
		log.Info("tracing on", "otlp_protocol", s.tracing.Protocol())
	}

	var key *proto.SecretKey
	if cfg.SecretKey != "" {
		if key, err = proto.ParseSecretKey(cfg.SecretKey); err != nil {
			return nil, fmt.Errorf("WEBHOOK_SECRET_ENCRYPTION_KEY: %w", err)
		}
	}

	ropts, err := cfg.RedisOptions()
	if err != nil {
		return nil, err
	}
	ropts.PoolSize = max(ropts.PoolSize, cfg.Workers+16)
	s.rdb = redis.NewClient(ropts)

	if cfg.NATSURL == "" {
		dir, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		s.embedded, err = natsserver.Start(ctx, natsserver.Options{StoreDir: dir, Listen: cfg.NATSListen, SyncAlways: cfg.SyncAlways, Logger: log.With("component", "nats")})
		if err != nil {
			return nil, fmt.Errorf("embedded NATS: %w", err)
		}
		log.Info("embedded JetStream started", "store_dir", dir, "listen", orNone(s.embedded.ClientURL()))
	}
	// Two connections: the bridge's publishing (and the natsink transport)
	// on one, the engine's pulls, acks and in-progress signals on the other,
	// so neither waits behind the other's writes on a shared connection.
	if s.nc, s.js, err = s.connect(cfg, log, "jetrelay"); err != nil {
		return nil, err
	}
	if s.engineNC, s.engineJS, err = s.connect(cfg, log, "jetrelay-engine"); err != nil {
		return nil, err
	}

	qc := queue.Config{
		Stream: cfg.Stream, Subject: cfg.Subject, Consumer: cfg.Consumer,
		Replicas: cfg.StreamReplicas, AckWait: cfg.AckWait, MaxAckPending: cfg.MaxAckPending,
	}.WithDefaults()
	s.queue = qc
	if err := retryUntil(ctx, log, "create JetStream stream", func() error {
		_, err := queue.EnsureStream(ctx, s.js, qc)
		return err
	}); err != nil {
		return nil, err
	}

	if cfg.Role == config.RoleAll || cfg.Role == config.RoleBridge {
		bc := bridge.Config{Queue: qc, InstanceID: cfg.BridgeID, QueueMode: queueMode(s.embedded != nil), Logger: log} // bridge.New names its component
		bc.AdoptLegacyProcessing, bc.LegacyProcessingIdle, bc.RetryBatchSize = cfg.AdoptReferenceProcessing, cfg.ProcessingRecoveryIdle, cfg.RetryBatchSize
		if s.tracing.Enabled() {
			// Only then: the bridge reads each batch's trace ids from Redis.
			bc.TracerProvider = s.tracing.Provider()
		}
		bc.Ordering = proto.Ordering(cfg.Ordering)
		s.bridge, err = bridge.New(s.rdb, s.js, bc)
		if err != nil {
			return nil, err
		}
		if s.embedded != nil {
			warnSeparateQueues(ctx, s.rdb, cfg.BridgeID, log)
		}
		s.reconcile, err = reconcile.New(s.rdb, s.js, reconcile.Config{
			Queue: qc, InstanceID: s.bridge.InstanceID(), Period: cfg.ReconcilePeriod, Margin: cfg.ReconcileMargin,
			MaxDeliveryAge: cfg.MaxDeliveryAge, Batch: cfg.ReconcileBatch, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		s.retention = &retention.Config{Interval: cfg.RetentionEvery, EventTTL: cfg.EventTTL, DeliveryTTL: cfg.DeliveryTTL, Logger: log.With("component", "retention")}
	}
	if cfg.Role == config.RoleAll || cfg.Role == config.RoleEngine {
		st := store.New(s.rdb)
		var keyErr error
		if err := retryUntil(ctx, log, "check the encryption key against stored secrets", func() error {
			if keyErr = checkSecretKey(ctx, st, key, log); errors.Is(keyErr, errKeyMismatch) {
				return nil // a wrong key is not retried
			}
			return keyErr
		}); err != nil {
			return nil, err
		}
		if keyErr != nil {
			return nil, keyErr
		}
		if s.guard, err = newGuard(ctx, cfg, st, log.With("component", "ssrf")); err != nil {
			return nil, err
		}
		s.ssrfEvery = cfg.SSRFRefresh
		// Every compiled-in driver (transports.go, and a custom build's
		// plugins) reads its settings through the config (flags included),
		// falling back to the environment for AWS_* variables.
		s.registry, err = transport.OpenRegistry(ctx, transport.Env{
			Getenv: cfg.Getenv, Logger: log.With("component", "transport"),
			// Drivers that reach tenant-chosen hosts (webhook, natsink,
			// sqs) vet them with the SSRF guard.
			Shared: map[any]any{
				natsink.EngineConn{}:    s.nc,
				transport.DialerKey{}:   transport.DialFunc(s.guard.DialContext),
				transport.URLCheckKey{}: s.guard.CheckURL,
			},
		})
		if err != nil {
			return nil, err
		}
		log.Info("transports compiled in", "schemes", strings.Join(s.registry.Schemes(), ","))
		s.engine, err = engine.New(s.rdb, s.engineJS, s.registry, engine.Config{
			Queue: qc, Workers: cfg.Workers, MinWorkers: cfg.MinWorkers, MemoryBudget: cfg.MemoryBudget, MaxDeliveryAge: cfg.MaxDeliveryAge, EventTTL: cfg.EventTTL,
			SecretKey: key, DrainTimeout: cfg.DrainTimeout, Logger: log.With("component", "engine"), Observer: s.metrics,
			TracerProvider: s.tracing.Provider(),
			Breaker:        engine.BreakerConfig{Threshold: cfg.BreakerThreshold, OpenFor: cfg.BreakerOpenFor, MaxOpenFor: cfg.BreakerMaxOpenFor},
			MaxInFlight:    cfg.MaxInFlight, ParkAfter: cfg.ParkAfter, InactivePolicy: cfg.InactivePolicy,
			NoAutoPipeline:  !cfg.RedisAutoPipeline,
			InactiveRecheck: cfg.InactiveRecheck,
			AllowUnsigned:   cfg.AllowUnsigned,
			NoIntakeHolds:   !cfg.IntakeHolds,
			// Standard Webhooks (docs/security.md).
			StandardWebhooks: cfg.StandardWebhooks, SecretRotationGrace: cfg.SecretRotationGrace,
			Ordering: proto.Ordering(cfg.Ordering),
		})
		if err != nil {
			return nil, err
		}
		s.metrics.WatchBreakers(s.engine.BreakerStats)
		s.metrics.WatchLimits(s.engine.Limits)
		s.metrics.WatchWork(s.engine.WorkStats)
		s.metrics.WatchPool(s.engine.PoolStats)
		s.metrics.WatchParks(s.engine.ParkStats)
	}
	if s.bridge != nil {
		s.metrics.WatchBridge(s.bridge.Stats)
		s.metrics.WatchReconciler(s.reconcile.Stats)
	}
	s.metrics.WatchQueue(s.js, qc)
	s.metrics.WatchWaiting(s.js, qc)
	s.metrics.WatchRedis(store.New(s.rdb))
	s.metrics.WatchReadiness(s.Checks())
	return s, nil
}

// Run runs the bridge and the engine until ctx is done and both have
// drained. If one of them stops on its own with an error, the other is
// stopped too, so the process exits instead of running half-alive.
func (s *Stack) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// The errors are collected, not sent on a channel sized for a count of
	// components that grows with each release (a send past its buffer
	// blocked the process's shutdown forever).
	var mu sync.Mutex
	var all []error
	start := func(name string, run func(context.Context) error) {
		wg.Go(func() {
			err := run(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.Error(name+" stopped", "err", err)
				cancel()
			}
			mu.Lock()
			all = append(all, err)
			mu.Unlock()
		})
	}
	if s.guard != nil {
		start("ssrf policy", func(ctx context.Context) error { s.guard.Run(ctx, s.ssrfEvery); return nil })
	}
	if s.retention != nil {
		start("retention", func(ctx context.Context) error { retention.Run(ctx, store.New(s.rdb), *s.retention); return nil })
	}
	if s.bridge != nil {
		start("bridge", s.bridge.Run)
		start("reconciler", s.reconcile.Run)
	}
	if s.engine != nil {
		start("engine", s.runEngine) // heartbeat.go
	}
	wg.Wait()
	return errors.Join(all...)
}

// Checks are the /readyz checks: Redis and JetStream reachable, and each
// part this process runs able to work.
func (s *Stack) Checks() map[string]mgmt.Check {
	c := map[string]mgmt.Check{
		"redis": func(ctx context.Context) error { return s.rdb.Ping(ctx).Err() },
		"jetstream": func(ctx context.Context) error {
			_, err := s.js.AccountInfo(ctx)
			return err
		},
	}
	if s.bridge != nil {
		c["bridge"] = s.bridge.Ready
	}
	if s.engine != nil {
		c["engine"] = s.engine.Ready
	}
	if s.guard != nil {
		c["ssrf_policy"] = s.guard.Ready
	}
	return c
}

// Close closes the transports and connections and stops the embedded NATS
// server, after Run has returned; it flushes the last spans.
func (s *Stack) Close() {
	if s.registry != nil {
		if err := s.registry.Close(); err != nil {
			s.log.Warn("close transports", "err", err)
		}
	}
	for _, nc := range []*nats.Conn{s.engineNC, s.nc} {
		if nc != nil {
			_ = nc.Drain()
			nc.Close()
		}
	}
	if s.embedded != nil {
		s.embedded.Shutdown()
	}
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
	if s.tracing != nil {
		// The engine has drained: flush the spans of its last attempts.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.tracing.Shutdown(ctx); err != nil {
			s.log.Warn("flush traces", "err", err)
		}
	}
}

// connect opens one NATS connection (in-process to the embedded server, or
// to NATS_URL with endless reconnects) and its JetStream context.
func (s *Stack) connect(cfg *config.Config, log *slog.Logger, name string) (*nats.Conn, jetstream.JetStream, error) {
	var nc *nats.Conn
	var err error
	if s.embedded != nil {
		nc, err = s.embedded.Connect(nats.Name(name))
	} else {
		nc, err = nats.Connect(cfg.NATSURL, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("NATS disconnected", "connection", name, "err", err) }),
			nats.ReconnectHandler(func(c *nats.Conn) {
				log.Info("NATS reconnected", "connection", name, "server", c.ConnectedUrlRedacted())
			}))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS: %w", err)
	}
	// The bridge counts on a lost PubAck freeing its async-publish slot.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// retryUntil retries op with capped backoff until it succeeds or ctx ends,
// so a process started before its dependencies waits for them.
func retryUntil(ctx context.Context, log *slog.Logger, what string, op func() error) error {
	delay := 200 * time.Millisecond
	for {
		err := op()
		if err == nil {
			return nil
		}
		log.Warn(what+" failed; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "none (in-process only)"
	}
	return s
}

// NewLogger is jetrelay's logger: JSON or text lines on w, from the
// JETRELAY_LOG_FORMAT and JETRELAY_LOG_LEVEL settings.
func NewLogger(format, level string, w io.Writer) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
