package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/redisproc"
	"github.com/jetrelay/jetrelay/proto"
)

// benchEnv is one isolated run of jetrelay: its own redis-server (AOF off),
// an embedded JetStream in a temporary directory, jetrelay built by the same
// app.New as `run` (or `run` itself in a separate process), and an admin
// writer on its own Redis connection, as cycles-server-admin would be.
type benchEnv struct {
	cfg     *config.Config
	redis   *redisproc.Server
	stack   *app.Stack   // nil when jetrelay runs as child
	child   *relayChild  // envOptions.child
	replica []*app.Stack // further replicas sharing stack's NATS and Redis (envOptions.replicas)
	key     *proto.SecretKey
	admin   *admin.Writer // through an autopipeliner: for throughput
	direct  *admin.Writer // one round trip per command: for latency at a fixed rate
	adminDB *redis.Client
	logs    *logCounter
	dataDir string
	servers []*http.Server
	closers []io.Closer
	stopRun context.CancelFunc
	runDone chan error
	usage0  resources
}

// envOptions shape a benchEnv beyond `run`'s defaults.
type envOptions struct {
	// settings override JETRELAY_* variables (e.g. JETRELAY_WORKERS), after
	// the caller's environment.
	settings map[string]string
	// encrypt stores signing secrets encrypted (enc:…, as admin does when
	// WEBHOOK_SECRET_ENCRYPTION_KEY is set), so every send decrypts one.
	encrypt bool
	// replicas > 1 starts that many stacks (bridge + engine each) in this
	// process; the first runs the embedded JetStream with a loopback
	// listener and every replica, the first included, connects to it over
	// TCP, as separate processes would.
	replicas int
	// tcp gives the embedded JetStream a loopback listener and connects
	// every replica through it, even a single one.
	tcp bool
	// held builds jetrelay but does not start it: call start.
	held bool
	// child, a jetrelay binary, runs jetrelay as a separate process (that
	// binary's `run`) instead of in this one, configured by the same
	// settings; one replica, with its embedded JetStream, or with tcp a
	// JetStream server in this process that it reaches over loopback TCP.
	child string
}

// startBenchEnv starts everything. The engine settings are `run`'s defaults
// unless a JETRELAY_* variable in the environment or opts.settings sets them.
func startBenchEnv(ctx context.Context, b *benchContext, opts envOptions) (_ *benchEnv, err error) {
	env := &benchEnv{usage0: resourcesNow()}
	defer func() {
		if err != nil {
			env.close()
		}
	}()
	env.redis, err = redisproc.Start(ctx, redisproc.Options{})
	if err != nil {
		if errors.Is(err, redisproc.ErrNotInstalled) {
			return nil, fmt.Errorf("the benchmark needs redis-server: %w", err)
		}
		return nil, err
	}
	if env.dataDir, err = os.MkdirTemp("", "jetrelay-bench-"); err != nil {
		return nil, err
	}
	forced := map[string]string{
		"REDIS_URL":          env.redis.URL(),
		"JETRELAY_DATA_DIR":  env.dataDir,
		"JETRELAY_BRIDGE_ID": "bench",
		// The receivers are on 127.0.0.1 over http, which the SSRF guard's
		// defaults refuse: the operator allow-list opens exactly that.
		"JETRELAY_SSRF_ALLOW_CIDRS": "127.0.0.0/8",
		"JETRELAY_SSRF_ALLOW_HTTP":  "true",
		// Sends hanging on a black hole would hold every phase's shutdown
		// for the whole default drain; nothing is measured after it.
		"JETRELAY_DRAIN_TIMEOUT": "1s",
	}
	if opts.encrypt {
		raw := make([]byte, 32)
		_, _ = rand.Read(raw)
		forced["WEBHOOK_SECRET_ENCRYPTION_KEY"] = base64.StdEncoding.EncodeToString(raw)
		if env.key, err = proto.ParseSecretKey(forced["WEBHOOK_SECRET_ENCRYPTION_KEY"]); err != nil {
			return nil, err
		}
	}
	switch {
	case opts.child != "" && opts.replicas > 1:
		return nil, errors.New("a separate jetrelay process runs one replica")
	case opts.child != "" && opts.tcp:
		// The separate process reaches a JetStream server in this one over
		// loopback TCP, as a replica reaches a NATS cluster: the server's
		// CPU is then this process's, which the case adds to the child's.
		ns, err := natsserver.Start(ctx, natsserver.Options{StoreDir: filepath.Join(env.dataDir, "nats"), Listen: "127.0.0.1:0"})
		if err != nil {
			return nil, err
		}
		env.closers = append(env.closers, closerFunc(ns.Shutdown))
		forced["NATS_URL"] = ns.ClientURL()
	case opts.tcp || opts.replicas > 1:
		forced["JETRELAY_NATS_LISTEN"] = "127.0.0.1:0"
	}
	if opts.child != "" {
		// No fixed port to collide on, and no per-delivery logging cost.
		forced["MANAGEMENT_PORT"] = "0"
		forced["JETRELAY_LOG_LEVEL"] = "warn"
	}
	getenv := func(k string) string {
		if v, ok := forced[k]; ok {
			return v
		}
		if v, ok := opts.settings[k]; ok {
			return v
		}
		// Only tuning knobs pass through: the bench must never reach a
		// Redis or NATS named in the caller's environment.
		if strings.HasPrefix(k, "JETRELAY_") {
			return b.getenv(k)
		}
		return ""
	}
	// A child is configured by exactly the variables the configuration
	// read here: what it asked for and got a value.
	settings := map[string]string{}
	recorded := func(k string) string {
		v := getenv(k)
		if v != "" {
			settings[k] = v
		}
		return v
	}
	if env.cfg, err = config.Load("bench", nil, recorded, b.progress); err != nil {
		return nil, err
	}
	env.logs = newLogCounter(b.verbose)
	if opts.child != "" {
		env.child = newRelayChild(opts.child, settings, b.getenv, b.verbose)
	} else if env.stack, err = app.New(ctx, env.cfg, env.logs.logger(), b.version); err != nil {
		return nil, err
	}
	for i := 2; i <= opts.replicas; i++ {
		forced["NATS_URL"] = env.stack.EmbeddedClientURL()
		forced["JETRELAY_BRIDGE_ID"] = fmt.Sprintf("bench-%d", i)
		cfg, err := config.Load("bench", nil, getenv, io.Discard)
		if err != nil {
			return nil, err
		}
		r, err := app.New(ctx, cfg, env.logs.logger(), b.version)
		if err != nil {
			return nil, err
		}
		env.replica = append(env.replica, r)
	}
	env.adminDB = redis.NewClient(&redis.Options{Addr: env.redis.Addr(), PoolSize: 32})
	// Admin's writes go through an autopipeliner: the concurrent writers'
	// commands (the same commands, in the same order per event) share round
	// trips, so the load generator takes less of the machine jetrelay is
	// measured on. Admin runs elsewhere in production.
	ap, err := env.adminDB.AutoPipeline()
	if err != nil {
		return nil, err
	}
	env.admin = admin.NewWriter(ap, env.key)
	env.direct = admin.NewWriter(env.adminDB, env.key)
	if !opts.held {
		if err := env.start(ctx); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// start runs every replica of jetrelay until close.
func (env *benchEnv) start(ctx context.Context) error {
	if env.child != nil {
		return env.child.start()
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	env.stopRun = stop
	stacks := append([]*app.Stack{env.stack}, env.replica...)
	env.runDone = make(chan error, len(stacks))
	for _, s := range stacks {
		go func() { env.runDone <- s.Run(runCtx) }()
	}
	return nil
}

// closerFunc closes by calling itself.
type closerFunc func()

func (f closerFunc) Close() error {
	f()
	return nil
}

// childExited is closed when a child jetrelay has exited; nil (never
// ready) when jetrelay runs in this process or has not been started.
func (env *benchEnv) childExited() <-chan struct{} {
	if env.child == nil {
		return nil
	}
	return env.child.done
}

// serve runs h on a new loopback listener and returns its address.
func (env *benchEnv) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	env.servers = append(env.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), nil
}

// blackHole accepts connections and never answers on them, like an endpoint
// behind a firewall that drops replies or a hung process.
type blackHole struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

func (env *benchEnv) blackHole() (*blackHole, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	bh := &blackHole{ln: ln}
	env.closers = append(env.closers, bh)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			bh.mu.Lock()
			bh.conns = append(bh.conns, c)
			bh.accepted++
			bh.mu.Unlock()
		}
	}()
	return bh, nil
}

func (bh *blackHole) addr() string { return bh.ln.Addr().String() }

func (bh *blackHole) connections() int {
	bh.mu.Lock()
	defer bh.mu.Unlock()
	return bh.accepted
}

// Close stops accepting and drops every held connection.
func (bh *blackHole) Close() error {
	err := bh.ln.Close()
	bh.mu.Lock()
	defer bh.mu.Unlock()
	for _, c := range bh.conns {
		_ = c.Close()
	}
	return err
}

// slowEndpoint answers 200, but only after delay.
type slowEndpoint struct {
	delay              time.Duration
	mu                 sync.Mutex
	received, answered int
}

func (s *slowEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.received++
	s.mu.Unlock()
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	w.WriteHeader(http.StatusOK)
	s.mu.Lock()
	s.answered++
	s.mu.Unlock()
}

func (s *slowEndpoint) counts() (received, answered int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received, s.answered
}

// consumerPeak samples the engine's JetStream consumer until ctx ends and
// reports the largest ack-pending count seen: how many of MaxAckPending's
// slots were taken at worst.
func (env *benchEnv) consumerPeak(ctx context.Context, every time.Duration) <-chan int {
	out := make(chan int, 1)
	go func() {
		peak := 0
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if info, err := env.consumerInfo(ctx); err == nil {
				peak = max(peak, info.NumAckPending)
			}
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

func (env *benchEnv) consumerInfo(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	c, err := env.stack.JetStream().Consumer(ctx, env.cfg.Stream, env.cfg.Consumer)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// redisCPU is the redis-server's own CPU time so far (INFO cpu).
func (env *benchEnv) redisCPU(ctx context.Context) time.Duration {
	info, err := env.adminDB.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// redisReads is how many reads redis-server has processed from its
// clients' sockets (INFO stats total_reads_processed): one per round trip
// of any client, however many commands it carried; -1 when the server does
// not say (before Redis 6).
func (env *benchEnv) redisReads(ctx context.Context) int64 {
	return env.redisStat(ctx, "total_reads_processed")
}

// redisStat is the counter name of INFO stats, -1 when Redis does not
// give it.
func (env *benchEnv) redisStat(ctx context.Context, name string) int64 {
	return env.redisInfoInt(ctx, "stats", name)
}

// redisPID is redis-server's process id (INFO server), -1 unknown.
func (env *benchEnv) redisPID(ctx context.Context) int {
	return int(env.redisInfoInt(ctx, "server", "process_id"))
}

// redisInfoInt is the integer field name of INFO section, -1 when Redis
// does not give it.
func (env *benchEnv) redisInfoInt(ctx context.Context, section, name string) int64 {
	info, err := env.adminDB.Info(ctx, section).Result()
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// close stops jetrelay (draining it) and everything else, removing the
// temporary directory.
func (env *benchEnv) close() {
	if env.child != nil {
		env.child.stop(10 * time.Second)
	}
	if env.stopRun != nil {
		env.stopRun()
		for range cap(env.runDone) {
			<-env.runDone
		}
	}
	for _, srv := range env.servers {
		_ = srv.Close()
	}
	for _, c := range env.closers {
		_ = c.Close()
	}
	for _, r := range env.replica {
		r.Close()
	}
	if env.stack != nil {
		env.stack.Close()
	}
	if env.adminDB != nil {
		_ = env.adminDB.Close()
	}
	if env.redis != nil {
		_ = env.redis.Stop()
	}
	if env.dataDir != "" {
		_ = os.RemoveAll(env.dataDir)
	}
}

// resources is the process's CPU time at one moment.
type resources struct {
	cpu time.Duration
	at  time.Time
}

func resourcesNow() resources {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return resources{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), at: time.Now()}
}

// resetPeakRSS starts a new VmHWM measurement (Linux: clear_refs 5). It
// reports false where that is not possible, and the peak is then the
// process's lifetime peak.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is VmHWM from /proc/self/status, in bytes (0 if unknown).
func peakRSS() int64 {
	v, err := procField("/proc/self/status", "VmHWM")
	if err != nil {
		return 0
	}
	var kb int64
	if _, err := fmt.Sscanf(v, "%d kB", &kb); err != nil {
		return 0
	}
	return kb << 10
}
