package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jetrelay/jetrelay/internal/logtail"
)

// relayChild is jetrelay as an operator runs one replica: the binary's
// `run`, with its embedded JetStream, in a process of its own. A case that
// runs it measures that process's memory and CPU, not the bench's.
type relayChild struct {
	binary string
	env    []string  // the whole environment of the process
	echo   io.Writer // its output, as it comes (-v), or io.Discard
	out    *logtail.Tail

	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // what Wait said, valid once done is closed
}

// childRuntimeVars are the Go runtime's settings, passed on to the child
// so that it runs as the bench process would have run jetrelay.
var childRuntimeVars = []string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG"}

// newRelayChild prepares a child with settings (jetrelay's configuration
// variables) plus PATH, HOME and the Go runtime's settings from getenv.
func newRelayChild(binary string, settings map[string]string, getenv func(string) string, echo io.Writer) *relayChild {
	env := []string{"PATH=" + getenv("PATH"), "HOME=" + getenv("HOME")}
	for _, k := range childRuntimeVars {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range settings {
		env = append(env, k+"="+v)
	}
	return &relayChild{binary: binary, env: env, echo: echo, out: logtail.New(16 << 10)}
}

// start launches the process. The kernel kills it if the bench dies first
// (Linux), so no relay outlives a crashed or killed bench.
func (c *relayChild) start() error {
	c.cmd = exec.Command(c.binary, "run")
	c.cmd.Env = c.env
	w := io.MultiWriter(c.echo, c.out)
	c.cmd.Stdout, c.cmd.Stderr = w, w
	dieWithParent(c.cmd)
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("start %s run: %w", c.binary, err)
	}
	c.done = make(chan struct{})
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return nil
}

// exitError says that the process ended, how, and what it wrote last.
func (c *relayChild) exitError() error {
	<-c.done
	how := "exited"
	if c.err != nil {
		how = c.err.Error()
	}
	out := c.out.String()
	if out == "" {
		out = "(nothing)"
	}
	return fmt.Errorf("jetrelay run (pid %d) ended early (%s); its last output:\n%s", c.cmd.Process.Pid, how, out)
}

// stop asks the process to drain and exit (SIGTERM, as an orchestrator
// would) and kills it if it is still there after within.
func (c *relayChild) stop(within time.Duration) {
	if c.done == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux architecture Go supports).
const userHZ = 100

// childUsage is what /proc says of the running process.
type childUsage struct {
	cpu     time.Duration // user + system, all threads
	peakRSS int64         // VmHWM: the peak resident set so far
	// rssFile is the file-backed part of the resident set now (RssFile,
	// 0 when unknown): the pages of the jetrelay binary (its code and
	// read-only data) the kernel mapped in. It grows as more of the
	// binary runs (unless memory pressure reclaims pages), so the peak
	// less it is at least the rest's part of the peak.
	rssFile int64
}

// usage reads the running process's childUsage.
func (c *relayChild) usage() (childUsage, error) {
	dir := "/proc/" + strconv.Itoa(c.cmd.Process.Pid)
	raw, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return childUsage{}, err
	}
	var u childUsage
	if u.cpu, err = statCPU(string(raw)); err != nil {
		return childUsage{}, fmt.Errorf("%s/stat: %w", dir, err)
	}
	if u.peakRSS, err = statusKB(dir, "VmHWM"); err != nil {
		return childUsage{}, err
	}
	// RssFile only splits the figure (a kernel before 4.5 lacks it).
	u.rssFile, _ = statusKB(dir, "RssFile")
	return u, nil
}

// statusKB reads a "<n> kB" field of dir/status, in bytes.
func statusKB(dir, name string) (int64, error) {
	v, err := procField(dir+"/status", name)
	if err != nil {
		return 0, err
	}
	var kb int64
	if _, err := fmt.Sscanf(v, "%d kB", &kb); err != nil {
		return 0, fmt.Errorf("%s/status: %s %q: %w", dir, name, v, err)
	}
	return kb << 10, nil
}

// statCPU is the user + system CPU time (all threads) in the text of a
// /proc/<pid>/stat file.
func statCPU(stat string) (time.Duration, error) {
	// The command name in parentheses may hold spaces; the fields after
	// it start with the state (field 3), so utime and stime (14, 15) are
	// the 12th and 13th.
	i := strings.LastIndex(stat, ") ")
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(stat[i+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// relayBinary is the jetrelay binary a separate-process case runs: named,
// or this executable. A test binary cannot stand in for jetrelay (`run`
// would run its tests), so it must be named then.
func relayBinary(named string) (string, error) {
	if named != "" {
		return named, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(exe, ".test") {
		return "", errors.New("this is a test binary, not jetrelay: name the jetrelay binary with --relay-binary")
	}
	return exe, nil
}
