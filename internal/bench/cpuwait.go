package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A latency tail on a shared machine is often time spent runnable but not
// running: a goroutine's thread, or redis-server, woken and waiting for a
// CPU. The kernel counts that wait per thread in /proc/<pid>/task/<tid>/
// schedstat (its second field, in ns; the third is how many time slices
// the thread got), so the benchmark can say how long the run's processes
// waited instead of guessing.

// cpuWait is a process's wait for a CPU so far, summed over its threads.
type cpuWait struct {
	wait   time.Duration // runnable, not running
	slices int64         // time slices run
	ok     bool          // at least one thread was read
}

// cpuWaitOf reads pid's threads' schedstat; ok is false when the kernel
// does not keep it (no CONFIG_SCHED_INFO) or pid is gone. A thread that
// exits between two samples takes its counts with it, so a difference is
// a lower bound.
func cpuWaitOf(pid int) cpuWait {
	if pid <= 0 {
		return cpuWait{}
	}
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var w cpuWait
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		wait, slices, ok := parseSchedstat(string(raw))
		if !ok {
			continue
		}
		w.wait, w.slices, w.ok = w.wait+wait, w.slices+slices, true
	}
	return w
}

// parseSchedstat reads one schedstat line: time run (ns), time waited on
// a run queue (ns), time slices run.
func parseSchedstat(s string) (wait time.Duration, slices int64, ok bool) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return 0, 0, false
	}
	ns, err1 := strconv.ParseInt(f[1], 10, 64)
	n, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || ns < 0 || n < 0 {
		return 0, 0, false
	}
	return time.Duration(ns), n, true
}

// since is the wait between an earlier sample a and w.
func (w cpuWait) since(a cpuWait) cpuWait {
	if !a.ok || !w.ok {
		return cpuWait{}
	}
	return cpuWait{wait: max(0, w.wait-a.wait), slices: max(0, w.slices-a.slices), ok: true}
}

// perSlice is the mean wait before a time slice.
func (w cpuWait) perSlice() time.Duration {
	if w.slices == 0 {
		return 0
	}
	return w.wait / time.Duration(w.slices)
}

// phrase says, for a report, how long a process waited over wall: the
// wait per second of the run (summed over its threads) and per time slice.
func (w cpuWait) phrase(who string, wall time.Duration) string {
	return fmt.Sprintf("%s %.0f ms per second (%d µs per time slice, %d slices)",
		who, 1000*w.wait.Seconds()/max(wall.Seconds(), 1e-9), w.perSlice().Microseconds(), w.slices)
}
