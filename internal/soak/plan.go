package soak

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Kind is a kind of fault.
type Kind string

// Fault kinds. A replica is a cluster jetrelay that runs an engine; the
// bridge is the cluster's bridge-only process; embedded is the jetrelay on
// its own embedded server.
const (
	KillReplica      Kind = "SIGKILL replica"
	StallReplica     Kind = "SIGSTOP replica"
	TermReplica      Kind = "SIGTERM replica"
	KillBridge       Kind = "SIGKILL bridge"
	TermBridge       Kind = "SIGTERM bridge"
	KillEmbedded     Kind = "SIGKILL embedded"
	TermEmbedded     Kind = "SIGTERM embedded"
	KillRedis        Kind = "SIGKILL redis-server"
	RestartNATS      Kind = "restart nats-server"
	KillNATS         Kind = "SIGKILL nats-server"
	KillStreamLeader Kind = "SIGKILL stream leader"
	Pause            Kind = "pause subscription"
	Resume           Kind = "resume subscription"
	Disable          Kind = "disable subscription"
	Enable           Kind = "re-enable subscription"
	Requeue          Kind = "operator requeue"
	Handback         Kind = "handback + switch-over"
)

// weights is how often each kind is drawn; Handback is placed once, in the
// middle of the run, and is not drawn.
var weights = []struct {
	kind Kind
	w    int
}{
	{KillReplica, 4}, {TermReplica, 2}, {StallReplica, 2}, {KillBridge, 1}, {TermBridge, 1},
	{KillEmbedded, 1}, {TermEmbedded, 1}, {KillRedis, 2},
	{RestartNATS, 1}, {KillNATS, 1}, {KillStreamLeader, 2},
	{Pause, 2}, {Resume, 2}, {Disable, 1}, {Enable, 2}, {Requeue, 2},
}

// Fault is one planned fault: when, what, which target (an index the
// executor takes modulo the candidates) and how long the target stays down.
type Fault struct {
	At     time.Duration
	Kind   Kind
	Target int
	Down   time.Duration
}

// ModeChange is a planned change of one endpoint's answers.
type ModeChange struct {
	At       time.Duration
	Endpoint int
	Mode     Mode
}

// Plan is everything a seed decides: the faults, the endpoints' modes and
// the events' pacing.
type Plan struct {
	Faults []Fault
	Modes  []ModeChange
}

// NewPlan draws the plan of a run of duration d over endpoints endpoints
// from seed. The same seed and arguments always give the same plan.
func NewPlan(seed uint64, d time.Duration, endpoints int) Plan {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var p Plan
	total := 0
	for _, w := range weights {
		total += w.w
	}
	handbackAt := d / 2
	for at := 2*time.Second + between(rng, 0, time.Second); at < d; at += between(rng, time.Second, 3*time.Second) {
		if handbackAt > 0 && at >= handbackAt {
			p.Faults = append(p.Faults, Fault{At: handbackAt, Kind: Handback})
			handbackAt = 0
			continue
		}
		pick := rng.IntN(total)
		var kind Kind
		for _, w := range weights {
			if pick < w.w {
				kind = w.kind
				break
			}
			pick -= w.w
		}
		p.Faults = append(p.Faults, Fault{At: at, Kind: kind, Target: rng.IntN(1 << 16), Down: between(rng, 300*time.Millisecond, 3*time.Second)})
	}
	if handbackAt > 0 {
		p.Faults = append(p.Faults, Fault{At: handbackAt, Kind: Handback})
	}
	for ep := range endpoints {
		for at := between(rng, 0, 3*time.Second); at < d; at += between(rng, 2*time.Second, 8*time.Second) {
			m := ModeHealthy
			switch r := rng.IntN(100); {
			case r < 45:
			case r < 58:
				m = Mode500
			case r < 71:
				m = Mode503
			case r < 86:
				m = ModeSlow
			default:
				m = ModeBlackhole
			}
			p.Modes = append(p.Modes, ModeChange{At: at, Endpoint: ep, Mode: m})
		}
	}
	// An outage of every endpoint just before the handback leaves retries
	// and put-offs waiting as wake-ups, which must survive the rollback.
	if d/2 > 4*time.Second {
		for ep := range endpoints {
			p.Modes = append(p.Modes, ModeChange{At: d/2 - 4*time.Second, Endpoint: ep, Mode: Mode503})
		}
	}
	slices.SortStableFunc(p.Modes, func(a, b ModeChange) int { return int(a.At - b.At) })
	return p
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}
