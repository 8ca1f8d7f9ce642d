package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jetrelay/jetrelay/internal/freeport"
	"github.com/jetrelay/jetrelay/internal/logtail"
)

// ErrNotInstalled means no redis-server binary could be found.
var ErrNotInstalled = errors.New("redis-server not found on PATH; install it (Debian: apt-get install redis-server) or point jetrelay at an existing Redis with REDIS_URL")

// Options configures a redis-server child process. The zero value is a
// throwaway server: no persistence, a temporary directory, a free port.
type Options struct {
	// Dir is the working directory for AOF/RDB files. Empty means a new
	// temporary directory that Stop removes.
	Dir string
	// AppendOnly turns on the append-only file with fsync every second,
	// the production-like persistence that survives Kill and Restart.
	// Without it RDB snapshots are off too, so nothing is written to Dir.
	AppendOnly bool
	// FsyncAlways, with AppendOnly, fsyncs the append-only file after every
	// write (appendfsync always) instead of every second: an acknowledged
	// write then survives even a power loss (a killed process loses nothing
	// either way: its writes are in the kernel's cache).
	FsyncAlways bool
	// Password, when set, is required from every client (requirepass).
	Password string
	// Binary is the redis-server executable; empty looks it up on PATH.
	Binary string
	// Port to listen on; 0 picks a free one.
	Port int
}

const (
	// defaultStartTimeout bounds startup when the caller's context has no
	// deadline: loading a large AOF is slow, but a server that never answers
	// must not hang a test forever.
	defaultStartTimeout = 30 * time.Second
	// stopTimeout is how long a graceful shutdown may take before SIGKILL.
	stopTimeout = 10 * time.Second
	// freePortAttempts bounds retries when a picked port is taken between
	// probing it and redis-server binding it.
	freePortAttempts = 5
	logTailBytes     = 64 << 10
)

// errPortTaken marks a start that failed only because the port was in use.
var errPortTaken = errors.New("port already in use")

// Server is a running (or stopped) redis-server child process.
// Its methods are safe for concurrent use.
type Server struct {
	opts    Options
	binary  string
	dir     string
	ownsDir bool
	port    int // fixed once Start returns; Restart reuses it
	log     *logtail.Tail

	mu   sync.Mutex
	proc *process // nil or exited when not running
}

// process is one launch of redis-server; err is valid once done is closed.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start launches redis-server bound to 127.0.0.1 and returns once it answers
// PING. ctx bounds the startup only, not the server's lifetime.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := lookBinary(opts.Binary)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, binary: bin, dir: opts.Dir, log: logtail.New(logTailBytes)}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "jetrelay-redis-"); err != nil {
			return nil, fmt.Errorf("redisproc: create data dir: %w", err)
		}
		s.ownsDir = true
	} else if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("redisproc: create data dir: %w", err)
	}

	attempts := 1
	if opts.Port == 0 {
		attempts = freePortAttempts
	}
	for range attempts {
		port := opts.Port
		if port == 0 {
			if port, err = freeport.One(); err != nil {
				break
			}
		}
		var p *process
		if p, err = s.launch(ctx, port); err == nil {
			s.port, s.proc = port, p
			return s, nil
		}
		if opts.Port != 0 || !errors.Is(err, errPortTaken) {
			break
		}
	}
	if s.ownsDir {
		os.RemoveAll(s.dir)
	}
	return nil, err
}

func lookBinary(bin string) (string, error) {
	if bin == "" {
		path, err := exec.LookPath("redis-server")
		if err != nil {
			return "", ErrNotInstalled
		}
		return path, nil
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("redisproc: cannot run redis-server binary: %w", err)
	}
	return path, nil
}

func (s *Server) args(port int) []string {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
	}
	if s.opts.AppendOnly {
		fsync := "everysec"
		if s.opts.FsyncAlways {
			fsync = "always"
		}
		args = append(args, "--appendonly", "yes", "--appendfsync", fsync)
	} else {
		args = append(args, "--appendonly", "no", "--save", "")
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	return args
}

// launch starts one redis-server process on port and waits until it answers.
// On failure the process is gone and the error carries its log.
func (s *Server) launch(ctx context.Context, port int) (*process, error) {
	s.log.Reset()
	cmd := exec.Command(s.binary, s.args(port)...)
	cmd.Dir = s.dir
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisproc: start %s: %w", s.binary, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := s.awaitReady(ctx, p, addr); err != nil {
		if !p.exited() {
			cmd.Process.Kill()
			<-p.done
		}
		log := s.log.String()
		if strings.Contains(log, "Address already in use") {
			err = errPortTaken
		}
		return nil, fmt.Errorf("redisproc: redis-server on %s did not start: %w\n%s", addr, err, log)
	}
	return p, nil
}

// awaitReady polls until the server started as p answers on addr. It checks
// the answering server's pid, so a foreign server that grabbed the port is
// not mistaken for ours.
func (s *Server) awaitReady(ctx context.Context, p *process, addr string) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	var lastErr error
	for {
		pid, err := probe(ctx, addr, s.opts.Password)
		switch {
		case err == nil && pid == p.cmd.Process.Pid:
			return nil
		case err == nil:
			lastErr = fmt.Errorf("another redis-server (pid %d) answers on %s: %w", pid, addr, errPortTaken)
		default:
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if p.exited() {
				return fmt.Errorf("exited early (%v)", p.err)
			}
			return fmt.Errorf("%w (last probe: %v)", ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

// Addr is the server's host:port on the loopback interface.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a redis:// URL for the server, with the password when one is set,
// ready for redis.ParseURL or REDIS_URL.
func (s *Server) URL() string {
	u := url.URL{Scheme: "redis", Host: s.Addr()}
	if s.opts.Password != "" {
		u.User = url.UserPassword("", s.opts.Password)
	}
	return u.String()
}

// Stop shuts the server down gracefully (SIGTERM, so the AOF is flushed),
// waits for it to exit, and removes the data directory if Start created it.
// Stopping a server that is not running only does the cleanup.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.terminate(syscall.SIGTERM)
	if s.ownsDir {
		if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
			err = fmt.Errorf("redisproc: remove data dir: %w", rmErr)
		}
	}
	return err
}

// Running reports whether the server's process is running: false after
// Stop or Kill, or when it died on its own.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it to
// exit. The data directory is kept so Restart can recover from the AOF.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.terminate(syscall.SIGKILL)
}

// Restart starts the server again on the same port and directory; with
// AppendOnly the data written before a Stop or Kill is loaded again.
// A running server is shut down gracefully first.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.terminate(syscall.SIGTERM); err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("redisproc: create data dir: %w", err)
	}
	p, err := s.launch(ctx, s.port)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// terminate sends sig to the running process, if any, and waits for it to
// exit, escalating to SIGKILL after stopTimeout. Callers hold s.mu.
func (s *Server) terminate(sig syscall.Signal) error {
	p := s.proc
	if p == nil || p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !p.exited() {
		return fmt.Errorf("redisproc: signal redis-server: %w", err)
	}
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("redisproc: redis-server ignored %v for %v and was killed:\n%s", sig, stopTimeout, s.log.String())
	}
	if sig == syscall.SIGTERM && p.err != nil {
		return fmt.Errorf("redisproc: redis-server shutdown: %w\n%s", p.err, s.log.String())
	}
	return nil
}
