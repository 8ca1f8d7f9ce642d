package engine

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

func TestBreakers_OpenPeriodDoublesWhileDownAndIsCapped(t *testing.T) {
	s := newBreakers(BreakerConfig{OpenFor: time.Second, MaxOpenFor: 10 * time.Second})
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i, w := range want {
		if got := s.openFor(int32(i + 1)); got != w*time.Second {
			t.Errorf("trip %d: open for %s, want %s", i+1, got, w*time.Second)
		}
	}
}

func TestBreakers_OpenAfterThresholdProbeOnceThenCloseOnSuccess(t *testing.T) {
	s := newBreakers(BreakerConfig{Threshold: 3, OpenFor: 50 * time.Millisecond})
	now := time.Now()
	for i := range 3 {
		done, _, ok := s.admit("whsub_a", now)
		if !ok {
			t.Fatalf("attempt %d refused before the threshold", i+1)
		}
		done(errFailedAttempt)
	}
	if st := s.state("whsub_a"); st != gobreaker.StateOpen {
		t.Fatalf("state after 3 failures = %s, want open", st)
	}
	if _, wait, ok := s.admit("whsub_a", time.Now()); ok || wait.Before(time.Now()) {
		t.Fatalf("open breaker admitted a send (ok=%v, wait=%v)", ok, wait)
	}
	// Other subscriptions are unaffected.
	if done, _, ok := s.admit("whsub_b", time.Now()); !ok {
		t.Fatal("another subscription was refused")
	} else {
		done(nil)
	}
	time.Sleep(60 * time.Millisecond) // the open period itself is what is under test
	probe, _, ok := s.admit("whsub_a", time.Now())
	if !ok {
		t.Fatal("no half-open probe after the open period")
	}
	if _, _, ok := s.admit("whsub_a", time.Now()); ok {
		t.Fatal("a second send got through while the probe is out")
	}
	probe(nil)
	if st := s.state("whsub_a"); st != gobreaker.StateClosed {
		t.Fatalf("state after a successful probe = %s, want closed", st)
	}
}

func TestBreakers_FailedProbeReopensForLonger(t *testing.T) {
	s := newBreakers(BreakerConfig{Threshold: 1, OpenFor: 40 * time.Millisecond, MaxOpenFor: time.Second})
	done, _, _ := s.admit("whsub_a", time.Now())
	done(errFailedAttempt)
	first := s.openPeriod(s.get("whsub_a", time.Now()))
	time.Sleep(50 * time.Millisecond) // let the first open period pass
	probe, _, ok := s.admit("whsub_a", time.Now())
	if !ok {
		t.Fatal("no probe")
	}
	probe(errFailedAttempt)
	if second := s.openPeriod(s.get("whsub_a", time.Now())); second != 2*first {
		t.Errorf("open period after a failed probe = %s, want %s", second, 2*first)
	}
}

func TestBreakers_AdmissionsWithoutASendDoNotCount(t *testing.T) {
	s := newBreakers(BreakerConfig{Threshold: 2})
	for range 10 {
		done, _, ok := s.admit("whsub_a", time.Now())
		if !ok {
			t.Fatal("refused")
		}
		done(errNotAttempted)
	}
	if st := s.state("whsub_a"); st != gobreaker.StateClosed {
		t.Errorf("state = %s; admissions without a send must not trip the breaker", st)
	}
}

func TestBreakers_MemoryIsBoundedAndIdleOnesAreEvicted(t *testing.T) {
	const n = 100_000
	s := newBreakers(BreakerConfig{MaxBreakers: n, IdleAfter: time.Hour})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	now := time.Now()
	for i := range n {
		done, _, _ := s.admit(fmt.Sprintf("whsub_%016x", i), now)
		done(nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d breakers: %.1f MB (%.0f B each)", n, float64(used)/(1<<20), float64(used)/n)
	if used > 64<<20 {
		t.Errorf("%d breakers use %d MB, over the 64 MB budget", n, used>>20)
	}
	// Over the bound, the least recently used go.
	done, _, _ := s.admit("whsub_newcomer", now)
	done(nil)
	if s.len() != n {
		t.Errorf("len = %d, want the bound %d", s.len(), n)
	}
	// Closed breakers idle past IdleAfter are dropped as new ones come in.
	later := now.Add(2 * time.Hour)
	for i := range 1000 {
		done, _, _ := s.admit(fmt.Sprintf("whsub_later%011d", i), later)
		done(nil)
	}
	if s.len() >= n {
		t.Errorf("len = %d; idle breakers were not evicted", s.len())
	}
	runtime.KeepAlive(s)
}
