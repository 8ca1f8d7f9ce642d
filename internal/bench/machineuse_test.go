package bench

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestProcStatCPU_SumsTheBusyFieldsAndTheStealOfTheCPULine(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  1000 20 300 90000 50 4 6 70 500 0\ncpu0 500 10 150 45000 25 2 3 35 250 0\n"
	busy, steal, ok := procStatCPU(stat)
	if !ok {
		t.Fatal("a well-formed cpu line was not read")
	}
	if want := 1330 * time.Second / userHZ; busy != want {
		t.Errorf("busy = %v, want %v (user + nice + system + irq + softirq; idle, iowait and guest, which user holds, left out)", busy, want)
	}
	if want := 70 * time.Second / userHZ; steal != want {
		t.Errorf("steal = %v, want %v", steal, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, _, ok := procStatCPU(bad); ok {
			t.Errorf("%q was read as a cpu line", bad)
		}
	}
}

func TestMachineUse_NamesAMachineBusyWithOtherWorkOrStolenTime(t *testing.T) {
	at := time.Unix(1000, 0)
	a := machineSample{at: at, busy: 100 * time.Second, steal: 10 * time.Second, own: 50 * time.Second, ok: true}
	cases := []struct {
		name         string
		busy, own, s time.Duration // added over 10 s on 2 CPUs
		quiet        bool
	}{
		{"the run itself filled both CPUs", 19 * time.Second, 19 * time.Second, 0, true},
		{"another process took half a core", 19 * time.Second, 14 * time.Second, 0, false},
		{"the hypervisor took 5 % of the CPUs", 18 * time.Second, 18 * time.Second, time.Second, false},
		{"rounding between ticks and rusage", 10 * time.Second, 10*time.Second + 20*time.Millisecond, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := machineSample{at: at.Add(10 * time.Second), busy: a.busy + c.busy, steal: a.steal + c.s, own: a.own + c.own, ok: true}
			u, ok := useBetween(a, b, 2)
			if !ok {
				t.Fatal("two readable samples gave no figure")
			}
			if u.quiet() != c.quiet {
				t.Errorf("quiet = %v, want %v (others %.2f cores, steal %.1f %%)", u.quiet(), c.quiet, u.othersCores(), 100*u.stealShare())
			}
			if s := u.sentence(); strings.Contains(s, "not quiet") == c.quiet {
				t.Errorf("the document says %q", s)
			}
		})
	}
	if _, ok := useBetween(a, machineSample{}, 2); ok {
		t.Error("an unreadable /proc/stat gave a figure")
	}
}

// A busy process the benchmark did not start is counted as the machine's
// other work, and the benchmark's own CPU is not: whatever else runs
// beside this test only adds to the former.
func TestSampleMachine_CountsAnotherProcessButNotTheRunsOwnWork(t *testing.T) {
	spin := exec.Command("sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	a := sampleMachine()
	deadline := time.Now().Add(5 * time.Second)
	var spun time.Duration
	for time.Now().Before(deadline) && spun < 300*time.Millisecond {
		spun = processCPU(t, spin.Process.Pid)
		time.Sleep(20 * time.Millisecond) // polling another process's CPU: there is no event to await
	}
	b := sampleMachine() // before the spinner is reaped: its time is still another process's
	_ = spin.Process.Kill()
	_ = spin.Wait()
	if spun < 300*time.Millisecond {
		t.Fatalf("the spinning process got only %v of CPU in 5 s", spun)
	}
	u, ok := useBetween(a, b, 2)
	if !ok {
		t.Fatal("/proc/stat exists but was not read")
	}
	// The spinner ran before a too, so not all of spun is in the window;
	// about 20 ms of it at most (one poll) plus its start.
	if min := spun / 2; u.others < min {
		t.Errorf("others = %v, want at least %v: the spinner alone used %v", u.others, min, spun)
	}

	// Now the run's own CPU: the spinner's time is reaped into this
	// process's children, and this process spins too.
	c := sampleMachine()
	until := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(until) {
	}
	d := sampleMachine()
	if own := d.own - c.own; own < 100*time.Millisecond {
		t.Errorf("own = %v after this process spun for 200 ms", own)
	}
}

// processCPU is user + system time of a running process, from /proc.
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	d, err := statCPU(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
