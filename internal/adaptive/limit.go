package adaptive

import (
	"math"
	"time"
)

// Sample is one finished send, as the limit learns from it.
type Sample struct {
	// Latency is how long the send took.
	Latency time.Duration
	// Dropped: the endpoint did not answer (a timeout, a refused or reset
	// connection) or answered that it is failing or overloaded (5xx, 408,
	// 429, a throttle). A drop is the loss signal of TCP congestion control.
	Dropped bool
	// InFlight is how many sends to the endpoint were running when this one
	// ended, itself included: a limit grows only while it is in use.
	InFlight int
	// At is when the send ended.
	At time.Time
}

// LimitConfig tunes a Limit. Zero values take the defaults in withDefaults.
type LimitConfig struct {
	// Initial is the limit of an endpoint nothing is known about yet,
	// default 16 (the fixed limit jetrelay had before it adapted).
	Initial int
	// Max bounds the limit, default 64.
	Max int
	// Tolerance is how many times its no-load latency an endpoint may take
	// before the limit shrinks, default 1.5 (Netflix Gradient2's default).
	Tolerance float64
	// Slack is a latency rise too small to mean anything (scheduling noise
	// of a loaded machine), default 10ms: a 1ms endpoint answering in 4ms
	// is not overloaded.
	Slack time.Duration
	// Backoff multiplies the limit on every drop, default 0.8: after a wave
	// of timeouts as large as the limit, about one send is left.
	Backoff float64
	// Baseline is how long the lowest latency seen stands for the
	// endpoint's no-load latency, default 30s: the limit's own cuts bring
	// fresh low-load answers well within it, and an endpoint that became
	// slower for good is not held at 1 for longer than that.
	Baseline time.Duration
}

func (c LimitConfig) withDefaults() LimitConfig {
	if c.Max <= 0 {
		c.Max = 64
	}
	if c.Initial <= 0 {
		c.Initial = 16
	}
	c.Initial = min(c.Initial, c.Max)
	if c.Tolerance < 1 {
		c.Tolerance = 1.5
	}
	if c.Slack <= 0 {
		c.Slack = 10 * time.Millisecond
	}
	if c.Backoff <= 0 || c.Backoff >= 1 {
		c.Backoff = 0.8
	}
	if c.Baseline <= 0 {
		c.Baseline = 30 * time.Second
	}
	return c
}

// Limit is one endpoint's adaptive concurrency limit: additive increase,
// multiplicative decrease (AIMD), with latency as the early congestion
// signal, in the spirit of TCP Vegas and Netflix's concurrency-limits.
//
//   - A healthy answer while the limit is in use (at least half of it
//     running) raises it, as in TCP Reno: by one until the first cut (slow
//     start: the limit doubles every round trip, so a 1 ms endpoint reaches
//     the whole pool in milliseconds), by 1/limit after it (congestion
//     avoidance: one more send per round trip, probing gently near the
//     level that was too much).
//   - A drop (no answer, 5xx, 429, a throttle) multiplies it by Backoff:
//     a black hole's wave of timeouts takes it to about 1.
//   - A latency above Tolerance × the endpoint's no-load latency + Slack
//     multiplies it by their ratio (at most halving it), once per round
//     trip, so queueing inside an overloaded endpoint shrinks the limit
//     before its requests time out.
//
// AIMD rather than a pure gradient limiter: a gradient limiter only sees
// latency, and the costliest endpoints for a delivery engine are the ones
// that do not answer at all (a send that times out holds a worker for the
// whole attempt timeout); drops must cut hard. AIMD also converges to a
// fair share among endpoints that contend for the same resource
// (Chiu and Jain, 1989). The latency signal compares a short-term average
// (as Netflix's Gradient2) with the lowest latency of the last Baseline
// (as TCP Vegas and Envoy's adaptive concurrency compare with a minimum
// round trip): an average that follows the latency up would let an
// overloaded endpoint's queue creep back.
//
// A Limit is not safe for concurrent use: Pool serializes it.
type Limit struct {
	cfg     LimitConfig
	limit   float64
	short   float64    // recent latency, ns (moving average over ~5 answers)
	lowest  [2]float64 // lowest latency, ns, of this half of the Baseline window and of the previous one (0: none)
	half    time.Time  // when this half began
	lastCut time.Time
	probe   float64 // slow start below this limit, congestion avoidance above
}

// NewLimit returns an endpoint's limit at cfg.Initial.
func NewLimit(cfg LimitConfig) *Limit {
	cfg = cfg.withDefaults()
	return &Limit{cfg: cfg, limit: float64(cfg.Initial), probe: float64(cfg.Max)}
}

// Value is the current limit, between 1 and Max.
func (l *Limit) Value() int { return max(1, int(l.limit)) }

// Latency is the endpoint's recent average latency, 0 before its first
// answer.
func (l *Limit) Latency() time.Duration { return time.Duration(l.short) }

// Update folds one finished send into the limit.
func (l *Limit) Update(s Sample) {
	if s.Dropped {
		l.limit = max(1, l.limit*l.cfg.Backoff)
		l.probe = l.limit
		return
	}
	x := max(1, float64(s.Latency))
	if l.short == 0 {
		l.short = x
	} else {
		l.short += (x - l.short) / 5
	}
	// The no-load latency is the lowest seen over the last Baseline (as
	// TCP Vegas and BBR take the minimum round trip), kept in two halves
	// so that old lows age out without storing every answer.
	if s.At.Sub(l.half) >= l.cfg.Baseline/2 {
		l.lowest = [2]float64{0, l.lowest[0]}
		l.half = s.At
	}
	if l.lowest[0] == 0 || x < l.lowest[0] {
		l.lowest[0] = x
	}
	base := l.lowest[0]
	if l.lowest[1] > 0 {
		base = min(base, l.lowest[1])
	}
	threshold := l.cfg.Tolerance*base + float64(l.cfg.Slack)
	if g := threshold / l.short; g < 1 {
		// Once per round trip: the answers still coming back were sent
		// before the last cut and say nothing about it. And only while
		// this answer is slow too: an average still high from one slow
		// start (a new connection) is not queueing.
		if s.At.Sub(l.lastCut) >= time.Duration(l.short) && x > threshold {
			l.limit = max(1, l.limit*max(0.5, g))
			l.probe = l.limit
			l.lastCut = s.At
		}
		return
	}
	if 2*s.InFlight >= int(math.Ceil(l.limit)) {
		step := 1.0
		if l.limit >= l.probe {
			step = 1 / l.limit
		}
		l.limit = min(float64(l.cfg.Max), l.limit+step)
	}
}
