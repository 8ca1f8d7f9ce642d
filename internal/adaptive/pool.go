package adaptive

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// PoolConfig tunes a Pool. Zero values take the defaults in withDefaults.
type PoolConfig struct {
	// Workers is the replica's worker pool, the most sends it runs at once:
	// the pool's size until SetWorkers changes it, and the bound of every
	// endpoint's limit.
	Workers int
	// Max bounds every endpoint's limit (JETRELAY_MAX_IN_FLIGHT_PER_SUBSCRIPTION);
	// 0: no bound but Workers.
	Max int
	// Initial is the limit of an endpoint nothing is known about yet,
	// default a quarter of the workers (what the fixed limit was), at
	// most Max.
	Initial int
	// FastAnswer: an endpoint whose recent sends take less than this on
	// average frees a worker within moments. It may use every worker, and
	// one at its limit is waited for (this long at most) rather than put
	// off. Default 100ms.
	FastAnswer time.Duration
	// Reserve is how many workers slower endpoints leave to the others, so
	// a delivery to anyone else always finds a worker without waiting for
	// a slow send to end. Default an eighth of the workers (of the pool's
	// size at the moment).
	Reserve int
	// Company is the most sends a slow endpoint may run while others were
	// sent to within the last second: what it may hold of the workers the
	// others need. Default a quarter of the workers (of the pool's size at
	// the moment; the fixed limit jetrelay had before it adapted).
	Company int
	// Idle is how long an endpoint's learned limit is kept after its last
	// send, default 5m.
	Idle time.Duration
	// Limit tunes each endpoint's Limit; its Initial and Max are the
	// Pool's.
	Limit LimitConfig
	// Now is the clock, default time.Now.
	Now func() time.Time
}

func (c PoolConfig) withDefaults() PoolConfig {
	c.Workers = max(1, c.Workers)
	if c.Max <= 0 || c.Max > c.Workers {
		c.Max = c.Workers
	}
	if c.Initial <= 0 {
		c.Initial = max(1, c.Workers/4)
	}
	c.Initial = min(c.Initial, c.Max)
	if c.FastAnswer <= 0 {
		c.FastAnswer = 100 * time.Millisecond
	}
	if c.Idle <= 0 {
		c.Idle = 5 * time.Minute
	}
	c.Limit.Initial, c.Limit.Max = c.Initial, c.Max
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Result says what a released slot was used for.
type Result int

const (
	// NotSent: nothing was sent (the breaker refused, the delivery turned
	// out to need no send); the limit learns nothing.
	NotSent Result = iota
	// Healthy: the endpoint answered and is not failing (even a 4xx: it
	// is up and said no quickly).
	Healthy
	// Dropped: no answer, or an answer that the endpoint is failing or
	// overloaded (Sample.Dropped).
	Dropped
)

// Pool holds the adaptive limits of the endpoints a replica sends to and
// shares its workers among them. An endpoint may start a send while it is
// under its own limit and:
//
//   - it answers fast (under FastAnswer): such an endpoint frees a worker
//     within moments, so sharing the pool in arrival order is fair to
//     everyone else, and it may use all of it;
//   - or, answering slowly, it is within its fair share, (Workers -
//     Reserve) divided among the busy endpoints, or leaves Reserve workers
//     free; and, while other endpoints are being sent to, within Company:
//     a slow endpoint's backlog can neither take the workers others need
//     nor be starved by other slow endpoints, and alone it may use all but
//     the Reserve.
//
// Idle endpoints are forgotten after Idle, so memory follows the endpoints
// being sent to. All methods are safe for concurrent use.
type Pool struct {
	cfg       PoolConfig
	mu        sync.Mutex
	keys      map[string]*endpoint
	workers   int // the pool's size now (SetWorkers)
	inflight  int // sends running, all endpoints
	busy      int // endpoints with a send running or a worker waiting
	waiters   int // workers waiting for a slot, all endpoints
	squeezed  int // deliveries turned away below their endpoint's own limit since the last Demand
	lastSweep time.Time
	// The last endpoint that asked for a slot, when, and when another one
	// last did: whether anyone but e is being sent to, in O(1).
	lastID         string
	lastAt, prevAt time.Time
}

type endpoint struct {
	id        string
	limit     *Limit
	inflight  int
	waiting   int           // workers waiting for a slot
	wake      chan struct{} // closed (and replaced) when a slot frees while workers wait
	nextFree  time.Time     // when the last delivery turned away can expect a slot
	firstSend time.Time     // before the first answer: when the oldest running send started
	lastUsed  time.Time
	// demand is the most sends it ran or waited for at once since
	// demandSince, or more than its limit if it was turned away (Demand).
	demand      int
	demandSince time.Time
	answered    time.Time // when a send of it last ended with an answer (Release, not Dropped)
	// sendingSince is when its sends last went from none running to one.
	sendingSince time.Time
}

func (e *endpoint) busy() bool { return e.inflight+e.waiting > 0 }

// NewPool returns an empty pool.
func NewPool(cfg PoolConfig) *Pool {
	cfg = cfg.withDefaults()
	return &Pool{cfg: cfg, keys: make(map[string]*endpoint), workers: cfg.Workers}
}

// SetWorkers changes the pool's size (at least 1, at most
// PoolConfig.Workers): the workers its sharing divides among the busy
// endpoints. Sends already running are not affected.
func (p *Pool) SetWorkers(n int) {
	p.mu.Lock()
	p.workers = max(1, min(n, p.cfg.Workers))
	p.mu.Unlock()
}

// reserve is Reserve for the pool's size now, p.mu held.
func (p *Pool) reserve() int {
	r := p.cfg.Reserve
	if r <= 0 {
		r = p.workers / 8
	}
	return min(r, p.workers-1)
}

// company is Company for the pool's size now, p.mu held.
func (p *Pool) company() int {
	if p.cfg.Company > 0 {
		return p.cfg.Company
	}
	return max(1, p.workers/4)
}

// Demand is what the endpoints asked of the pool recently: Want, what
// every endpoint that asked for a slot within the last `recent` could take
// at once were the pool large enough, and Squeezed, how many deliveries
// were turned away since the last call while their endpoint was below its
// own limit (the pool's sharing, not the endpoint, held them back). An
// endpoint turned away within the window wants its limit; one that never
// was wants the most sends it ran or waited for at once, not its limit: an
// ordered subscription's line runs one send at a time whatever its limit,
// and a hundred of them counted at their limits (1,600 sends) let the
// worker pool grow to 2,200 beside fast subscriptions that needed a few
// hundred (docs/ordering.md). It walks every endpoint the pool holds: call
// it on a timer, not per send.
func (p *Pool) Demand(recent time.Duration) (want, squeezed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	for _, e := range p.keys {
		if e.busy() || now.Sub(e.lastUsed) <= recent {
			want += min(e.limit.Value(), max(e.demand, e.inflight+e.waiting))
		}
		if now.Sub(e.demandSince) >= recent {
			// A new window: what it asks for from now on.
			e.demand, e.demandSince = e.inflight+e.waiting, now
		}
	}
	squeezed, p.squeezed = p.squeezed, 0
	return want, squeezed
}

// asked notes, p.mu held, that e ran or waited for n sends at once, or
// (n above its limit) was turned away: what Demand reports for it.
func (e *endpoint) asked(n int) { e.demand = max(e.demand, n) }

// Acquire takes a send slot for endpoint id. If none is free and the
// endpoint answers fast, or has not answered yet but may still prove fast,
// it waits up to FastAnswer for one. Otherwise it returns false and when
// the delivery should come back: deliveries turned away queue up virtually
// behind each other, one send time divided by the endpoint's capacity
// (Initial at least) apart (before the first answer, the time the first
// send has been running, FastAnswer at least, stands in for the send
// time), so ten thousand
// deliveries to a slow endpoint come back about as fast as it can take
// them, not all at once. A true result must be followed by exactly one
// Release.
func (p *Pool) Acquire(ctx context.Context, id string) (bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	p.sweep(now)
	e := p.keys[id]
	if e == nil {
		e = &endpoint{id: id, limit: NewLimit(p.cfg.Limit), wake: make(chan struct{})}
		p.keys[id] = e
	}
	e.lastUsed = now
	if id != p.lastID {
		p.lastID, p.prevAt = id, p.lastAt
	}
	p.lastAt = now
	if p.take(e, now) {
		return true, time.Time{}
	}
	if p.mayWait(e, now) {
		if p.wait(ctx, e) {
			return true, time.Time{}
		}
		now = p.cfg.Now()
	}
	if e.inflight < e.limit.Value() {
		p.squeezed++
	}
	e.asked(e.limit.Value() + 1)
	return false, p.comeBack(e, now)
}

// Waiting is how many workers wait in Acquire for a slot of an endpoint
// at its limit. A worker waiting there is not short of work: the pool's
// sizing counts it out of the busy ones (engine/workers.go).
func (p *Pool) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiters
}

// TurnAway counts a delivery to endpoint id turned away without asking for
// a slot (others wait for one ahead of it) and says when it should come
// back, as a refused Acquire does.
func (p *Pool) TurnAway(id string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	e := p.keys[id]
	if e == nil {
		return now.Add(p.cfg.FastAnswer)
	}
	e.lastUsed = now
	e.asked(e.limit.Value() + 1)
	return p.comeBack(e, now)
}

// comeBack queues a turned-away delivery behind the others (Acquire), p.mu
// held.
func (p *Pool) comeBack(e *endpoint, now time.Time) time.Time {
	latency := e.limit.Latency()
	if latency == 0 {
		latency = max(now.Sub(e.firstSend), p.cfg.FastAnswer)
	}
	if e.nextFree.Before(now) {
		e.nextFree = now.Add(latency)
	} else {
		// Spaced by the capacity a new endpoint starts with at least: a
		// limit just cut (one slow answer) grows back within round trips,
		// and a delivery put off cannot be called back sooner.
		e.nextFree = e.nextFree.Add(latency / time.Duration(max(p.capacity(e), p.cfg.Initial)))
	}
	return e.nextFree
}

// mayWait says whether a worker should wait for a slot of e, p.mu held.
// Only an endpoint that answers fast is worth a worker's wait, and only as
// many wait as its sends free slots for within FastAnswer (Little's law:
// capacity × FastAnswer ÷ latency): a backlog must not park the pool
// behind one endpoint, nor be put off far into the future while its limit
// is briefly low. Until its first answer, an endpoint whose first send is
// younger than FastAnswer may be fast too: all but the Reserve workers may
// wait for it, so a new fast endpoint's backlog is not put off for a
// guessed send time while its limit grows.
func (p *Pool) mayWait(e *endpoint, now time.Time) bool {
	switch {
	case p.fast(e):
		served := float64(p.capacity(e)) * float64(p.cfg.FastAnswer) / float64(e.limit.Latency())
		return e.waiting < max(e.inflight, int(served))
	case e.limit.Latency() == 0 && now.Sub(e.firstSend) < p.cfg.FastAnswer:
		return e.waiting+e.inflight < p.workers-p.reserve()
	}
	return false
}

// wait waits, p.mu held, up to FastAnswer for a slot of e and takes it.
func (p *Pool) wait(ctx context.Context, e *endpoint) bool {
	if !e.busy() {
		p.busy++
	}
	e.waiting++
	p.waiters++
	e.asked(e.inflight + e.waiting)
	defer func() {
		p.waiters--
		if e.waiting--; !e.busy() {
			p.busy--
		}
	}()
	t := time.NewTimer(p.cfg.FastAnswer)
	defer t.Stop()
	for {
		wake := e.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-t.C:
			p.mu.Lock()
			return false
		case <-ctx.Done():
			p.mu.Lock()
			return false
		}
		p.mu.Lock()
		if p.take(e, p.cfg.Now()) {
			return true
		}
	}
}

// take starts a send of e if its capacity allows, p.mu held.
func (p *Pool) take(e *endpoint, now time.Time) bool {
	if e.inflight >= p.capacity(e) {
		return false
	}
	if !e.busy() {
		p.busy++
	}
	if e.inflight == 0 && e.limit.Latency() == 0 {
		e.firstSend = now // no send has ended yet: this one is the oldest running
	}
	if e.inflight == 0 {
		e.sendingSince = now
	}
	e.inflight++
	p.inflight++
	// Workers waiting for a slot were counted when they began to wait
	// (wait); one of them may be taking this slot, so count the sends alone.
	e.asked(e.inflight)
	return true
}

// capacity is how many sends e may run now, p.mu held.
func (p *Pool) capacity(e *endpoint) int {
	limit := e.limit.Value()
	if p.fast(e) {
		return limit
	}
	busy := p.busy
	if !e.busy() {
		busy++ // e is asking, so it is busy too
	}
	usable := p.workers - p.reserve()
	share := usable / busy
	room := usable - (p.inflight - e.inflight)
	most := max(share, room)
	if p.othersActive(e) {
		most = min(most, p.company())
	}
	return max(1, min(limit, most))
}

// othersActive reports whether an endpoint other than e asked for a slot
// within the last second, p.mu held.
func (p *Pool) othersActive(e *endpoint) bool {
	other := p.lastAt
	if p.lastID == e.id {
		other = p.prevAt
	}
	return !other.IsZero() && p.cfg.Now().Sub(other) < time.Second
}

// fast reports whether e is known to answer within FastAnswer.
func (p *Pool) fast(e *endpoint) bool {
	l := e.limit.Latency()
	return l > 0 && l < p.cfg.FastAnswer
}

// Release ends a send of endpoint id begun by a successful Acquire and
// teaches its limit what the send took (latency) and how it went.
func (p *Pool) Release(id string, latency time.Duration, r Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.keys[id]
	if e == nil || e.inflight == 0 {
		return // not acquired: nothing to give back
	}
	now := p.cfg.Now()
	if r != NotSent {
		e.limit.Update(Sample{Latency: latency, Dropped: r == Dropped, InFlight: e.inflight, At: now})
	}
	if r == Healthy {
		e.answered = now
	}
	e.inflight--
	p.inflight--
	e.lastUsed = now
	if !e.busy() {
		p.busy--
	}
	if e.waiting > 0 {
		close(e.wake)
		e.wake = make(chan struct{})
	}
}

// Freeing reports whether endpoint id answers fast (Fast) and is freeing
// slots now: one of its sends ended with an answer within the last
// FastAnswer, or its sends began running (from none) less than FastAnswer
// ago, too recently to tell. An endpoint that answered fast and then
// stopped answering (a black hole, a backend behind it gone) keeps its
// fast latency until its sends time out, which Freeing does not take for
// a slot about to free.
func (p *Pool) Freeing(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.keys[id]
	if e == nil || !p.fast(e) {
		return false
	}
	now := p.cfg.Now()
	return now.Sub(e.answered) < p.cfg.FastAnswer || e.inflight > 0 && now.Sub(e.sendingSince) < p.cfg.FastAnswer
}

// Stalled reports whether endpoint id has sends running and none of them
// has ended with an answer, nor began, for at least four times its known
// latency and at least after: a black hole, or a backend behind the
// endpoint gone. A slow but healthy endpoint answers about every latency
// / limit.
func (p *Pool) Stalled(id string, after time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.keys[id]
	if e == nil || e.inflight == 0 {
		return false
	}
	last := e.sendingSince
	if e.answered.After(last) {
		last = e.answered
	}
	return p.cfg.Now().Sub(last) >= max(after, 4*e.limit.Latency())
}

// Fast reports whether endpoint id is known to answer within FastAnswer:
// a worker refused a slot of it waits in Acquire, since one frees within
// milliseconds.
func (p *Pool) Fast(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.keys[id]
	return e != nil && p.fast(e)
}

// Room is how many more sends endpoint id may start now (0 when it is at
// its limit or at its share of the pool) and its adaptive limit: what a
// caller holding deliveries back for it may let go at once.
func (p *Pool) Room(id string) (room, limit int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.keys[id]
	if e == nil {
		return p.cfg.Initial, p.cfg.Initial
	}
	return max(0, p.capacity(e)-e.inflight), e.limit.Value()
}

// sweep forgets endpoints idle for longer than Idle, at most every Idle/4.
func (p *Pool) sweep(now time.Time) {
	if now.Sub(p.lastSweep) < p.cfg.Idle/4 {
		return
	}
	p.lastSweep = now
	for id, e := range p.keys {
		if !e.busy() && now.Sub(e.lastUsed) > p.cfg.Idle {
			delete(p.keys, id)
		}
	}
}

// Status is one endpoint's limit as an operator sees it.
type Status struct {
	// ID is the endpoint's key (the subscription id).
	ID string
	// Limit is how many sends it may run at once now (its adaptive limit,
	// before the pool's sharing).
	Limit int
	// InFlight is how many it is running.
	InFlight int
	// Latency is its recent average send time, 0 before its first answer.
	Latency time.Duration
	// LastUsed is when a send to it last started or ended.
	LastUsed time.Time
}

// Busiest returns at most n endpoints used within the last since, the
// busiest first (most sends running, then highest limit, then id). It
// walks every endpoint the pool holds: call it per scrape, not per send.
func (p *Pool) Busiest(n int, since time.Duration) []Status {
	p.mu.Lock()
	now := p.cfg.Now()
	var out []Status
	for id, e := range p.keys {
		if e.busy() || now.Sub(e.lastUsed) <= since {
			out = append(out, Status{ID: id, Limit: e.limit.Value(), InFlight: e.inflight, Latency: e.limit.Latency(), LastUsed: e.lastUsed})
		}
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(cmp.Compare(b.InFlight, a.InFlight), cmp.Compare(b.Limit, a.Limit), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(n, len(out))]
}
