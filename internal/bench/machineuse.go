package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A benchmark on a shared machine is only as good as the machine was quiet
// while it ran. The load average cannot tell: a run that keeps both CPUs
// busy itself reads a load of 2 or more at its end. What can tell is the
// CPU time of the whole machine less the run's own: this process's and
// that of every child it started and waited for (the redis-servers, each
// `jetrelay run`). What is left was other processes'. A virtual machine
// can also lose its CPUs to the hypervisor (steal), which slows every
// figure without any process here being busy.

// machineSample is the machine's CPU time so far and the run's own.
type machineSample struct {
	at    time.Time
	busy  time.Duration // all CPUs, not idle: user, nice, system, irq, softirq (guest time is in user)
	steal time.Duration // all CPUs: time the hypervisor gave to something else
	own   time.Duration // this process and its waited-for children, user + system
	ok    bool          // /proc/stat was read
}

// sampleMachine reads /proc/stat and this process's resource usage.
func sampleMachine() machineSample {
	s := machineSample{at: time.Now()}
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	s.own = time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	s.busy, s.steal, s.ok = procStatCPU(string(raw))
	return s
}

// procStatCPU reads the busy and stolen time of all CPUs from the "cpu"
// line of /proc/stat.
func procStatCPU(stat string) (busy, steal time.Duration, ok bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	ticks := make([]int64, 8)
	for i := range ticks {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		ticks[i] = v
	}
	const user, nice, system, irq, softirq, stolen = 0, 1, 2, 5, 6, 7
	tick := time.Second / userHZ
	busy = time.Duration(ticks[user]+ticks[nice]+ticks[system]+ticks[irq]+ticks[softirq]) * tick
	return busy, time.Duration(ticks[stolen]) * tick, true
}

// machineUse is what the machine did during a run besides the run.
type machineUse struct {
	wall   time.Duration
	cpus   int
	others time.Duration // CPU time of processes other than the run's
	steal  time.Duration // CPU time the hypervisor took
}

// useBetween is the machine's use from a to b; false when /proc/stat could
// not be read at both.
func useBetween(a, b machineSample, cpus int) (machineUse, bool) {
	if !a.ok || !b.ok || cpus < 1 {
		return machineUse{}, false
	}
	// The clock ticks of /proc/stat and the nanoseconds of rusage do not
	// round alike: a few ticks of difference are no one's.
	others := max(0, (b.busy-a.busy)-(b.own-a.own))
	return machineUse{wall: b.at.Sub(a.at), cpus: cpus, others: others, steal: max(0, b.steal-a.steal)}, true
}

// Thresholds of a quiet machine: other processes together below a tenth of
// one CPU on average, and the hypervisor taking under 2 % of the CPUs'
// time. Either above moves a benchmark's rates by more than its own
// spread between runs.
const (
	quietOthersCores = 0.10
	quietStealShare  = 0.02
)

func (u machineUse) othersCores() float64 { return u.others.Seconds() / max(u.wall.Seconds(), 1e-9) }

func (u machineUse) stealShare() float64 {
	return u.steal.Seconds() / max(u.wall.Seconds()*float64(u.cpus), 1e-9)
}

// quiet reports whether nothing but the run used the machine's CPUs.
func (u machineUse) quiet() bool {
	return u.othersCores() < quietOthersCores && u.stealShare() < quietStealShare
}

// sentence says, for a document, what else the machine did during the run.
func (u machineUse) sentence() string {
	s := fmt.Sprintf("During the run, processes other than the benchmark's own (this process, its redis-servers and its `jetrelay run` children) used %.2f cores on average, and /proc/stat counted %.1f %% of the CPUs' time as stolen by the hypervisor (where it counts steal at all)", u.othersCores(), 100*u.stealShare())
	if u.quiet() {
		return s + ": the machine was quiet."
	}
	return s + ". **The machine was not quiet**: other work shared its CPUs, so rates are lower and noisier than on a quiet machine; this is to be re-run there."
}
