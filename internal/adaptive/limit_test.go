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

// A 50 ms endpoint whose answers were slow for a moment early on (new
// connections, a busy machine: `jetrelay bench --only slow-1` saw 118 ms
// answers in its first second) is cut once, ending slow start. It is
// healthy after that, with deliveries waiting: its limit must regain what
// the waiting work asks for within seconds. One more send per round trip
// took 128 round trips (6.4 s) from 22 to 150, which held a subscription
// at under half its rate for a whole benchmark case.
func TestLimit_AfterOneSlowMomentAHealthyEndpointRegainsItsLevelInSeconds(t *testing.T) {
	l := NewLimit(LimitConfig{Initial: 16, Max: 1000})
	at := time.Unix(0, 0)
	answer := func(latency time.Duration) {
		// A send answered every latency/limit: the limit's sends all
		// running, as with a backlog.
		at = at.Add(latency / time.Duration(l.Value()))
		l.Update(Sample{Latency: latency, InFlight: l.Value(), At: at})
	}
	for l.Value() < 22 {
		answer(50 * time.Millisecond)
	}
	peak := 0
	for range 10 {
		answer(120 * time.Millisecond)
		peak = max(peak, l.Value())
	}
	cut := l.Value()
	if cut >= peak {
		t.Fatalf("limit after ten answers at 120 ms (threshold 85 ms) = %d, its peak %d; want it cut", cut, peak)
	}
	start := at
	for l.Value() < 150 && at.Sub(start) < time.Minute {
		answer(50 * time.Millisecond)
	}
	if took := at.Sub(start); took > 2*time.Second {
		t.Errorf("limit took %s of healthy 50 ms answers to grow from %d to 150; want at most 2s", took, cut)
	}
}

// Congestion avoidance still probes gently right after a cut: the first
// round trips add about one send each, so an endpoint that is at its
// capacity is not pushed far past the level that was too much.
func TestLimit_RightAfterACutItGrowsAboutOneSendPerRoundTrip(t *testing.T) {
	l := NewLimit(LimitConfig{Initial: 40, Max: 1000, Slack: time.Millisecond})
	at := time.Unix(0, 0)
	feed(l, &at, 50, 20*time.Millisecond, false, time.Millisecond)
	feed(l, &at, 3, 60*time.Millisecond, false, time.Millisecond)
	cut := l.Value()
	start := at
	for at.Sub(start) < 4*20*time.Millisecond {
		at = at.Add(20 * time.Millisecond / time.Duration(l.Value()))
		l.Update(Sample{Latency: 20 * time.Millisecond, InFlight: l.Value(), At: at})
	}
	// Four round trips: 1 + 1.25 + 1.5 + 1.75 = 5.5 sends.
	if got := l.Value(); got < cut+3 || got > cut+8 {
		t.Errorf("limit four round trips after a cut to %d = %d; want it about 5 higher", cut, got)
	}
}
