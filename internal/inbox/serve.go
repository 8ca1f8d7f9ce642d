package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jetrelay/jetrelay/internal/mgmt"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// Config is `jetrelay inbox serve`. The zero value of every field but
// PostgresURL, Secrets and (when Workers > 0) Forward means its default.
type Config struct {
	Listen      string   // intake address; "" runs workers only
	Management  string   // /healthz, /readyz and /metrics address; "" serves none
	Paths       []string // intake paths besides "/"
	PostgresURL string
	Forward     string   // http(s) URL or nats://host:port/subject
	Secrets     []string // signing secrets; two during a rotation
	// Standard Webhooks: how far webhook-timestamp may be from the clock
	// (0: 5 minutes), and whether X-Cycles-Signature alone is refused.
	Tolerance            time.Duration
	StandardWebhooksOnly bool

	Workers        int           // claim loops; 0 means 4, negative runs intake only
	Batch          int           // rows per claim; 0 means 16
	Lease          time.Duration // claim lease; 0 means 30s
	MaxAttempts    int           // failures before dead_letter; 0 means 10
	ForwardTimeout time.Duration // per forward; 0 means 10s
	PollInterval   time.Duration // idle poll; 0 means 250ms
	MaxBodyBytes   int64         // intake body limit; 0 means receive.DefaultMaxBodyBytes
	// Backoff is the wait after failed attempt n (1-based); nil means
	// 1s doubling per attempt, capped at 5 minutes.
	Backoff func(attempt int) time.Duration
	Logger  *slog.Logger
}

func (c *Config) defaults() error {
	if c.PostgresURL == "" {
		return errors.New("inbox: a PostgreSQL URL is needed (--postgres-url or JETRELAY_INBOX_POSTGRES_URL)")
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Workers > 0 && c.Forward == "" {
		return errors.New("inbox: a forward target is needed (--forward http(s)://… or nats://host:port/subject)")
	}
	if c.Listen == "" && c.Workers < 0 {
		return errors.New("inbox: nothing to run: no listen address and no workers")
	}
	if c.Listen != "" && len(c.Secrets) == 0 {
		return errors.New("inbox: intake needs at least one signing secret (--secret, JETRELAY_INBOX_SECRET or --secret-file)")
	}
	setDefault(&c.Batch, 16)
	setDefault(&c.Lease, 30*time.Second)
	setDefault(&c.MaxAttempts, 10)
	setDefault(&c.ForwardTimeout, 10*time.Second)
	setDefault(&c.PollInterval, 250*time.Millisecond)
	setDefault(&c.MaxBodyBytes, receive.DefaultMaxBodyBytes)
	if c.Lease <= c.ForwardTimeout {
		return fmt.Errorf("inbox: the lease (%v) must be longer than the forward timeout (%v), or a slow forward is taken over while it runs", c.Lease, c.ForwardTimeout)
	}
	if c.Backoff == nil {
		c.Backoff = func(n int) time.Duration { return min(time.Second<<min(max(n-1, 0), 20), 5*time.Minute) }
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Server is a running inbox: intake, workers or both.
type Server struct {
	cfg   Config
	pool  *pgxpool.Pool
	store *Store
	ln    net.Listener
	http  *http.Server
	work  *workers
	mets  *metrics
}

// Start connects to PostgreSQL, migrates the schema, binds the intake
// address and returns; Run serves until its context ends.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, cfg.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("inbox: postgres: %w", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, pool: pool, store: NewStore(pool)}
	s.mets = newMetrics(s.store)
	if cfg.Workers > 0 {
		fwd, err := NewForwarder(cfg.Forward, cfg.ForwardTimeout)
		if err != nil {
			pool.Close()
			return nil, err
		}
		host, _ := os.Hostname()
		s.work = &workers{store: s.store, fwd: fwd, cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1),
			id: host + ":" + itoa(os.Getpid()), metrics: s.mets}
	}
	if cfg.Listen != "" {
		if err := s.listen(); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *Server) listen() error {
	opts := []receive.VerifierOption{receive.WithMaxBodyBytes(s.cfg.MaxBodyBytes), receive.WithTolerance(s.cfg.Tolerance)}
	if s.cfg.StandardWebhooksOnly {
		opts = append(opts, receive.WithStandardWebhooksOnly())
	}
	v, err := receive.NewVerifier(s.cfg.Secrets, opts...)
	if err != nil {
		return err
	}
	in := &Intake{store: s.store, verifier: v, maxBody: s.cfg.MaxBodyBytes, log: s.cfg.Logger, metrics: s.mets}
	if s.work != nil {
		in.wake = s.work.signal
	}
	mux := http.NewServeMux()
	mux.Handle("/", in)
	for _, p := range s.cfg.Paths {
		if p != "/" {
			mux.Handle(p, in)
		}
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("inbox: listen: %w", err)
	}
	s.ln = ln
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	return nil
}

// Addr is the intake's bound address, or "" without intake.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Store is the inbox table the server uses.
func (s *Server) Store() *Store { return s.store }

// Run serves until ctx ends, then stops intake (letting requests in flight
// finish), lets workers record what they are forwarding, and closes.
func (s *Server) Run(ctx context.Context) error {
	defer s.close()
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	errc := make(chan error, 1)
	if s.cfg.Management != "" {
		checks := map[string]mgmt.Check{"postgres": func(ctx context.Context) error { return s.pool.Ping(ctx) }}
		addr, err := mgmt.Serve(ctx, s.cfg.Management, mgmt.Handler(checks, map[string]http.Handler{"/metrics": s.mets.handler()}))
		if err != nil {
			return fmt.Errorf("inbox: management listen: %w", err)
		}
		s.cfg.Logger.Info("inbox: management listening", "addr", addr)
	}
	if s.http != nil {
		go func() { errc <- s.http.Serve(s.ln) }()
		s.cfg.Logger.Info("inbox: intake listening", "addr", s.Addr())
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if s.work != nil {
			s.cfg.Logger.Info("inbox: forwarding", "workers", s.cfg.Workers, "batch", s.cfg.Batch)
			s.work.run(workCtx)
		}
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	if s.http != nil {
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = s.http.Shutdown(shut)
		cancel()
	}
	stopWork()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Server) close() {
	if s.work != nil {
		s.work.fwd.Close()
	}
	if s.ln != nil {
		s.ln.Close() // already closed by Shutdown when Run served it
	}
	s.pool.Close()
}

func itoa(i int) string { return strconv.Itoa(i) }
