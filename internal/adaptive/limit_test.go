package adaptive

import (
	"testing"
	"time"
)

// feed gives l n answers of latency, one every gap, with the limit in use.
func feed(l *Limit, at *time.Time, n int, latency time.Duration, dropped bool, gap time.Duration) {
	for range n {
		*at = at.Add(gap)
		l.Update(Sample{Latency: latency, Dropped: dropped, InFlight: l.Value(), At: *at})
	}
}

func TestLimit_GrowsToItsBoundWhileAFastEndpointAnswersHealthy(t *testing.T) {
	l := NewLimit(LimitConfig{Initial: 4, Max: 200})
	at := time.Unix(0, 0)
	feed(l, &at, 300, time.Millisecond, false, 100*time.Microsecond)
	if got := l.Value(); got != 200 {
		t.Fatalf("limit after 300 fast healthy answers = %d, want the bound 200", got)
	}
}

func TestLimit_DoesNotGrowWhileMostOfItIsUnused(t *testing.T) {
	l := NewLimit(LimitConfig{Initial: 16, Max: 64})
	at := time.Unix(0, 0)
	for range 1000 {
		at = at.Add(time.Millisecond)
		l.Update(Sample{Latency: time.Millisecond, InFlight: 2, At: at})
	}
	if got := l.Value(); got != 16 {
		t.Fatalf("limit after answers with 2 of 16 in use = %d, want it unchanged at 16", got)
	}
}

func TestLimit_AWaveOfTimeoutsTakesItToOne(t *testing.T) {
	l := NewLimit(LimitConfig{Initial: 16, Max: 64})
	at := time.Unix(0, 0)
	feed(l, &at, 16, 10*time.Second, true, time.Millisecond)
	if got := l.Value(); got != 1 {
		t.Fatalf("limit after 16 timeouts = %d, want 1", got)
	}
	feed(l, &at, 5, 10*time.Second, true, time.Millisecond)
	if got := l.Value(); got != 1 {
		t.Fatalf("limit after more timeouts = %d, want it to stay at 1", got)
	}
}

func TestLimit_ShrinksWhenLatencyRisesAndRegrowsWhenItFalls(t *testing.T) {
	l := NewLimit(LimitConfig{Initial: 32, Max: 64})
	at := time.Unix(0, 0)
	feed(l, &at, 50, 20*time.Millisecond, false, time.Millisecond)
	grown := l.Value()
	// Ten times slower for two seconds: one cut per round trip.
	feed(l, &at, 100, 200*time.Millisecond, false, 20*time.Millisecond)
	if got := l.Value(); got > 4 {
		t.Fatalf("limit after latency rose from 20ms to 200ms = %d (was %d), want it shrunk toward 1", got, grown)
	}
	feed(l, &at, 200, 20*time.Millisecond, false, time.Millisecond)
	if got := l.Value(); got < 16 {
		t.Fatalf("limit after latency fell back to 20ms = %d, want it grown again", got)
	}
}

func TestLimit_IgnoresLatencyNoiseBelowTheSlack(t *testing.T) {
	l := NewLimit(LimitConfig{Initial: 8, Max: 64})
	at := time.Unix(0, 0)
	feed(l, &at, 20, 300*time.Microsecond, false, time.Millisecond)
	feed(l, &at, 100, 5*time.Millisecond, false, time.Millisecond)
	if got := l.Value(); got != 64 {
		t.Fatalf("limit of a 0.3ms endpoint answering in 5ms on a busy machine = %d, want 64", got)
	}
}

func TestLimit_ASlowerEndpointForGoodRegrowsAsItsBaselineFollows(t *testing.T) {
	l := NewLimit(LimitConfig{Initial: 16, Max: 64, Baseline: 10 * time.Second})
	at := time.Unix(0, 0)
	feed(l, &at, 10, 10*time.Millisecond, false, time.Millisecond)
	feed(l, &at, 6, 500*time.Millisecond, false, 500*time.Millisecond)
	low := l.Value()
	feed(l, &at, 200, 500*time.Millisecond, false, 500*time.Millisecond)
	if got := l.Value(); low > 2 || got <= 2*low {
		t.Fatalf("limit of an endpoint that stayed at 500ms: %d after the step, %d 100s later; want it cut, then regrown", low, got)
	}
}
