package engine

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestWorkers_TheMemoryBudgetBoundsThePool(t *testing.T) {
	// 64 MiB: half of it at 64 KiB a send is 512 workers, below the cap.
	w := newWorkers(64, 4096, 64<<20)
	if w.most != 512 {
		t.Fatalf("the pool may grow to %d workers under a 64 MiB budget, want 512", w.most)
	}
	starved := pressure{want: 100_000, squeezed: 10, busy: 64, sending: 0.9, cpu: 0.1, memory: 16 << 20}
	sizes := []int{}
	for range 10 {
		n := w.resize(starved)
		w.size.Store(int64(n))
		sizes = append(sizes, n)
	}
	if got := w.now(); got != 512 {
		t.Fatalf("held-back work grew the pool %v; want it to stop at the budget's 512", sizes)
	}

	// Past three quarters of the budget it grows no more, past the budget
	// it shrinks.
	w.size.Store(128)
	if n := w.resize(pressure{want: 100_000, squeezed: 10, busy: 128, sending: 0.9, cpu: 0.1, memory: 49 << 20}); n != 128 {
		t.Errorf("at 49 of 64 MiB the pool went from 128 to %d workers, want it held", n)
	}
	if n := w.resize(pressure{want: 100_000, squeezed: 10, busy: 128, sending: 0.9, cpu: 0.1, memory: 65 << 20}); n >= 128 {
		t.Errorf("at 65 of 64 MiB the pool went from 128 to %d workers, want it shrunk", n)
	}
}

func TestWorkers_ThePoolGrowsOnlyWhileWorkIsHeldBackAndTheCPUIsFree(t *testing.T) {
	cases := []struct {
		name string
		p    pressure
		want int
	}{
		{"work held back by the sharing, CPU free: doubles", pressure{want: 10_000, squeezed: 5, busy: 100, sending: 0.9, cpu: 0.3}, 200},
		{"work waiting for a busy pool, CPU free: doubles", pressure{want: 10_000, waiting: 5, busy: 100, sending: 0.9, cpu: 0.3}, 200},
		{"doubling stops at what the subscriptions could take", pressure{want: 80, squeezed: 5, busy: 100, sending: 0.9, cpu: 0.3}, 164},
		{"CPU saturated: holds", pressure{want: 10_000, squeezed: 5, busy: 100, sending: 0.9, cpu: 0.95}, 100},
		{"below four times the floor, work held back by the replica's own work still doubles", pressure{want: 10_000, waiting: 5, busy: 100, sending: 0.1, cpu: 0.3}, 200},
		{"nothing held back: shrinks by a twentieth", pressure{want: 10_000, busy: 10, cpu: 0.3}, 95},
		{"nothing held back: not below what is busy", pressure{want: 10_000, busy: 90, sending: 0.9, cpu: 0.3}, 112},
		{"work waiting while most workers are free: shrinks", pressure{want: 10_000, waiting: 5, busy: 50, cpu: 0.3}, 95},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorkers(64, 4096, -1)
			w.size.Store(100)
			if got := w.resize(c.p); got != c.want {
				t.Errorf("from 100 workers: %d, want %d", got, c.want)
			}
		})
	}
	w := newWorkers(64, 4096, -1)
	if got := w.resize(pressure{}); got != 64 {
		t.Errorf("an idle pool at its floor went to %d, want the floor 64", got)
	}
}

func TestWorkers_BeyondFourTimesTheFloorOnlySendsCallForMoreWorkers(t *testing.T) {
	// Floor 16: the pool may grow to 64 for any work held back; beyond
	// that, only while its busy workers spend at least half their time
	// sending.
	cases := []struct {
		name string
		from int
		p    pressure
		want int
	}{
		{"at four times the floor, workers waiting on their own work: held", 64, pressure{want: 10_000, waiting: 5, busy: 64, sending: 0.2, cpu: 0.3}, 64},
		{"at four times the floor, workers mostly sending: doubles", 64, pressure{want: 10_000, waiting: 5, busy: 64, sending: 0.6, cpu: 0.3}, 128},
		{"below four times the floor, doubling stops there", 48, pressure{want: 10_000, squeezed: 5, busy: 48, sending: 0.2, cpu: 0.3}, 64},
		{"far above, workers waiting on their own work: shrinks by a twentieth", 400, pressure{want: 10_000, waiting: 5, busy: 400, sending: 0.2, cpu: 0.3}, 380},
		{"just above, shrinking stops at four times the floor", 66, pressure{want: 10_000, waiting: 5, busy: 66, sending: 0.2, cpu: 0.3}, 64},
		{"nothing held back, nearly all busy on their own work: the reserve stops at four times the floor", 60, pressure{want: 10_000, busy: 58, sending: 0.2, cpu: 0.3}, 64},
		{"nothing held back, nearly all busy sending: the reserve of a quarter", 60, pressure{want: 10_000, busy: 58, sending: 0.9, cpu: 0.3}, 72},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorkers(16, 4096, -1)
			w.size.Store(int64(c.from))
			if got := w.resize(c.p); got != c.want {
				t.Errorf("from %d workers: %d, want %d", c.from, got, c.want)
			}
		})
	}
}

func TestWorkers_TheSendShareIntegratesTimeNotASample(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	w := newWorkers(16, 4096, -1)
	w.sendShare(ms(0), 0)
	// Two workers busy from 0 to 100 ms; one sends from 0 to 50 ms, the
	// other from 50 ms on, still sending at the tick: half their time.
	b1, b2 := w.busyTime.begin(ms(0)), w.busyTime.begin(ms(0))
	s1 := w.sendTime.begin(ms(0))
	w.sendTime.end(s1, ms(50))
	s2 := w.sendTime.begin(ms(50))
	if got := w.sendShare(ms(100), 0); got != 0.5 {
		t.Errorf("two busy workers, one sending at any instant: share %.2f, want 0.50", got)
	}
	// The next 100 ms: both still busy, the second still sending; only
	// this interval counts, so a quarter of the first one's send is
	// forgotten and the share is again a half.
	w.busyTime.end(b1, ms(200))
	if got := w.sendShare(ms(200), 0); got != 0.5 {
		t.Errorf("the next interval, one of two sending throughout: share %.2f, want 0.50", got)
	}
	// A worker waiting for a subscription's slot is not busy: the second
	// worker alone is, sending for the whole interval.
	w.busyTime.begin(ms(200))
	if got := w.sendShare(ms(300), 1); got != 1 {
		t.Errorf("one worker sending, the other waiting for a slot: share %.2f, want 1", got)
	}
	w.sendTime.end(s2, ms(300))
	w.busyTime.end(b2, ms(300))
	if got := w.sendShare(ms(400), 1); got != 0 {
		t.Errorf("nothing but a worker waiting for a slot: share %.2f, want 0", got)
	}
}

func TestCPUMeter_GoroutinesWaitingForACPUCountAsSaturated(t *testing.T) {
	// Four times as many spinning goroutines as CPUs: each waits for a
	// CPU most of the time, whatever else the machine runs, so the pool
	// must not grow.
	var c cpuMeter
	c.sample()
	stop := make(chan struct{})
	var spinning sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		spinning.Go(func() {
			for {
				select {
				case <-stop:
					return
				default: // spin: the scheduler preempts it every 10 ms
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the sampling period under test
	got := c.sample()
	close(stop)
	spinning.Wait()
	if got < saturatedCPU {
		t.Errorf("with every CPU contended the meter read %.2f, want at least %.2f (saturated)", got, saturatedCPU)
	}
}
