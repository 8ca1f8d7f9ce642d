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
	starved := pressure{want: 100_000, squeezed: 10, busy: 64, cpu: 0.1, memory: 16 << 20}
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
	if n := w.resize(pressure{want: 100_000, squeezed: 10, busy: 128, cpu: 0.1, memory: 49 << 20}); n != 128 {
		t.Errorf("at 49 of 64 MiB the pool went from 128 to %d workers, want it held", n)
	}
	if n := w.resize(pressure{want: 100_000, squeezed: 10, busy: 128, cpu: 0.1, memory: 65 << 20}); n >= 128 {
		t.Errorf("at 65 of 64 MiB the pool went from 128 to %d workers, want it shrunk", n)
	}
}

func TestWorkers_ThePoolGrowsOnlyWhileWorkIsHeldBackAndTheCPUIsFree(t *testing.T) {
	cases := []struct {
		name string
		p    pressure
		want int
	}{
		{"work held back by the sharing, CPU free: doubles", pressure{want: 10_000, squeezed: 5, busy: 100, cpu: 0.3}, 200},
		{"work waiting for a busy pool, CPU free: doubles", pressure{want: 10_000, waiting: 5, busy: 100, cpu: 0.3}, 200},
		{"doubling stops at what the subscriptions could take", pressure{want: 80, squeezed: 5, busy: 100, cpu: 0.3}, 164},
		{"CPU saturated: holds", pressure{want: 10_000, squeezed: 5, busy: 100, cpu: 0.95}, 100},
		{"nothing held back: shrinks by a twentieth", pressure{want: 10_000, busy: 10, cpu: 0.3}, 95},
		{"nothing held back: not below what is busy", pressure{want: 10_000, busy: 90, cpu: 0.3}, 112},
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
