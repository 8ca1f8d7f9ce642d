package bench

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseSchedstat_ReadsTheWaitAndTheSlicesAndRefusesAnythingElse(t *testing.T) {
	wait, slices, ok := parseSchedstat("213984 2783629 2\n")
	if !ok || wait != 2783629*time.Nanosecond || slices != 2 {
		t.Fatalf("parseSchedstat = %v, %d, %v; want 2.783629ms, 2, true", wait, slices, ok)
	}
	for _, bad := range []string{"", "1 2", "1 2 3 4", "1 x 3", "1 2 -3", "1 -2 3"} {
		if _, _, ok := parseSchedstat(bad); ok {
			t.Errorf("%q was read as a schedstat line", bad)
		}
	}
}

func TestCPUWait_ThisProcessIsReadAndItsSlicesOnlyGrow(t *testing.T) {
	a := cpuWaitOf(os.Getpid())
	if !a.ok {
		t.Fatal("this process's threads' schedstat was not read: the benchmark's CPU-wait figures would be missing")
	}
	// Run a few time slices: each sleep gives the thread up and it runs again.
	for range 20 {
		time.Sleep(time.Millisecond)
	}
	d := cpuWaitOf(os.Getpid()).since(a)
	if !d.ok || d.slices <= 0 {
		t.Fatalf("after 20 sleeps this process ran %d more time slices (ok %v)", d.slices, d.ok)
	}
	if s := d.phrase("this process", time.Second); !strings.Contains(s, "ms per second") || !strings.Contains(s, "per time slice") {
		t.Errorf("phrase = %q", s)
	}
	if w := cpuWaitOf(-1); w.ok {
		t.Error("no process was read as one")
	}
	if d := a.since(cpuWait{}); d.ok {
		t.Error("a difference from a sample that failed was taken as a measure")
	}
}
