package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jetrelay/jetrelay/internal/logtail"
)

// proc is a child process the soak starts, signals and starts again with
// the same command line.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  *logtail.Tail
	// logFile, when set, receives the whole output of every run, appended.
	logFile string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid once done is closed
}

func newProc(name, bin string, args, env []string) *proc {
	return &proc{name: name, bin: bin, args: args, env: env, log: logtail.New(32 << 10)}
}

// start launches the process; it must not be running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !exited(p.done) {
		return fmt.Errorf("%s is already running", p.name)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	var out io.Writer = p.log
	var file *os.File
	if p.logFile != "" {
		f, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
		file, out = f, io.MultiWriter(p.log, f)
	}
	cmd.Stdout, cmd.Stderr = out, out
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		if file != nil {
			file.Close()
		}
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		if file != nil {
			file.Close()
		}
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func exited(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// running reports whether the process is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !exited(p.done)
}

// stop sends sig and waits for the exit; after grace it escalates to
// SIGKILL. A process that is not running is left alone.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || exited(done) {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !exited(done) {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(grace):
	}
	// A Go process dumps its goroutines on SIGQUIT: the log then shows
	// what it was waiting for.
	cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	return fmt.Errorf("%s ignored %v for %s and was stopped with SIGQUIT (goroutine dump in its log)", p.name, sig, grace)
}

// signal sends sig to the running process (SIGSTOP, SIGCONT).
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || exited(p.done) {
		return fmt.Errorf("%s is not running", p.name)
	}
	return p.cmd.Process.Signal(sig)
}

// exitCode is the last run's exit status (-1 for a signal), valid once it
// has exited.
func (p *proc) exitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// run runs bin to completion with a deadline and returns its exit code and
// combined output.
func run(ctx context.Context, timeout time.Duration, env []string, bin string, args ...string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	setDeathSignal(cmd)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return -1, string(out), fmt.Errorf("%s %s did not finish within %s", bin, strings.Join(args, " "), timeout)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out), nil
	case err != nil:
		return -1, string(out), err
	}
	return 0, string(out), nil
}

// cleanEnv is the soak's environment without jetrelay or Redis settings of
// the developer's shell, plus kv pairs: a shell's REDIS_URL must never point
// a soak process at a real Redis.
func cleanEnv(kv map[string]string) []string {
	own := []string{"JETRELAY_", "REDIS_", "NATS_URL=", "MANAGEMENT_PORT=", "WEBHOOK_SECRET_", "MAX_DELIVERY_AGE_MS=",
		"EVENT_TTL_DAYS=", "DELIVERY_TTL_DAYS=", "OTEL_", "CYCLES_", "RETENTION_", "DISPATCH_", "RETRY_BATCH_SIZE="}
	var out []string
next:
	for _, e := range os.Environ() {
		for _, p := range own {
			if strings.HasPrefix(e, p) {
				continue next
			}
		}
		out = append(out, e)
	}
	for k, v := range kv {
		out = append(out, k+"="+v)
	}
	return out
}
