package engine

import (
	"container/list"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerConfig tunes the per-subscription circuit breakers.
type BreakerConfig struct {
	// Threshold is the number of consecutive failed attempts (no answer,
	// 5xx, 408, 429) that opens a subscription's breaker. Default 5.
	Threshold int
	// OpenFor is how long a breaker stays open the first time. Default 5s.
	OpenFor time.Duration
	// MaxOpenFor caps the open period, which doubles each time a half-open
	// probe fails while the endpoint stays down. Default 5m.
	MaxOpenFor time.Duration
	// MaxBreakers bounds how many breakers are kept; the least recently used
	// is dropped beyond it. Default 100,000 (about 40 MB at most).
	MaxBreakers int
	// IdleAfter drops a closed breaker nobody used for this long. Default 10m.
	IdleAfter time.Duration
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.Threshold <= 0 {
		c.Threshold = 5
	}
	if c.OpenFor <= 0 {
		c.OpenFor = 5 * time.Second
	}
	if c.MaxOpenFor < c.OpenFor {
		c.MaxOpenFor = max(5*time.Minute, c.OpenFor)
	}
	if c.MaxBreakers <= 0 {
		c.MaxBreakers = 100_000
	}
	if c.IdleAfter <= 0 {
		c.IdleAfter = 10 * time.Minute
	}
	return c
}

// errFailedAttempt and errNotAttempted are what the engine reports to a
// breaker: a send the endpoint failed, and an admission that ended without a
// send (the delivery turned out stale, inactive, …), which must not count.
var (
	errFailedAttempt = errors.New("engine: attempt failed")
	errNotAttempted  = errors.New("engine: no attempt made")
)

// breakers holds one circuit breaker per subscription, bounded in memory:
// an LRU list evicts the least recently used beyond MaxBreakers, and closed
// breakers idle for IdleAfter are dropped as they reach the LRU's tail.
// Losing a breaker only forgets a transient state: whether a subscription
// is disabled lives in Redis.
//
// gobreaker supplies the state machine (closed → open after Threshold
// consecutive failures → half-open after OpenFor with one probe → closed on
// its success, open again on its failure). Its open period is fixed, so the
// growing one is kept here in openUntil, which is never shorter than
// gobreaker's: once openUntil passes, gobreaker is already half-open.
type breakers struct {
	cfg BreakerConfig
	// onTrip, when set, is told of every opening with its end; it is
	// called with gobreaker's lock held and must not block.
	onTrip func(id string, until time.Time)
	mu     sync.Mutex
	lru    *list.List // of *breaker, most recently used at the front
	m      map[string]*list.Element
}

type breaker struct {
	id        string
	cb        *gobreaker.TwoStepCircuitBreaker[struct{}]
	trips     atomic.Int32 // consecutive openings without a close
	openUntil atomic.Int64 // unix nanos; 0 when not open
	openedAt  atomic.Int64 // unix nanos of the first of those openings; 0 when closed
	lastUsed  time.Time    // guarded by breakers.mu
}

func newBreakers(cfg BreakerConfig) *breakers {
	return &breakers{cfg: cfg.withDefaults(), lru: list.New(), m: make(map[string]*list.Element)}
}

// admit asks whether a send to subscription id may start now. If it may,
// done must be called exactly once with errFailedAttempt, nil (success) or
// errNotAttempted. If not, wait says until when to put the delivery off.
func (s *breakers) admit(id string, now time.Time) (done func(error), wait time.Time, ok bool) {
	b := s.get(id, now)
	if until := b.openUntil.Load(); until != 0 && now.UnixNano() < until {
		return nil, spread(time.Unix(0, until), s.openPeriod(b)), false
	}
	done, err := b.cb.Allow()
	if err != nil {
		// Half-open with its probe already out (or gobreaker's own clock
		// lagging ours by a hair): the probe decides within moments whether
		// the breaker closes or opens for longer; look again a period on.
		period := s.openPeriod(b)
		return nil, spread(now.Add(period), period), false
	}
	return done, time.Time{}, true
}

// probeAt is when subscription id's open breaker lets its next probe
// through on this replica, and its open period: the held-check of the
// deliveries it holds fires then (breakerhold.go).
func (s *breakers) probeAt(id string, now time.Time) (time.Time, time.Duration) {
	b := s.get(id, now)
	period := s.openPeriod(b)
	if until := b.openUntil.Load(); until != 0 && now.UnixNano() < until {
		return time.Unix(0, until), period
	}
	return now.Add(period), period
}

// lastChance lets a delivery whose retry schedule has ended (scheduleEnd)
// through subscription id's open breaker for its one send of its own: a
// breaker spares an endpoint, it never fails a delivery on another's
// answer. The send is not the breaker's probe and a failure leaves the
// open period as it is (the endpoint is known to be down); a success is
// fresh evidence that it is up, and closes the breaker.
func (s *breakers) lastChance(id string) func(error) {
	return func(result error) {
		if result != nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if e, ok := s.m[id]; ok && e.Value.(*breaker).openedAt.Load() != 0 {
			s.remove(e) // the next admit starts a closed breaker
		}
	}
}

// closeIfChanged closes subscription id's breaker when an operator acted
// on the subscription after the breaker first opened (Engine.freshEvidence
// names the signals): that must give the endpoint a fresh start on every
// replica, which each notices at its next handling of the subscription's
// deliveries.
func (s *breakers) closeIfChanged(id string, updatedAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		return
	}
	if opened := e.Value.(*breaker).openedAt.Load(); opened != 0 && updatedAt.UnixNano() > opened {
		s.remove(e) // the next admit starts a closed breaker
	}
}

// state reports a subscription's breaker state (closed if it has none).
func (s *breakers) state(id string) gobreaker.State {
	s.mu.Lock()
	e, ok := s.m[id]
	s.mu.Unlock()
	if !ok {
		return gobreaker.StateClosed
	}
	return e.Value.(*breaker).cb.State()
}

// len is the number of breakers held.
func (s *breakers) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *breakers) get(id string, now time.Time) *breaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[id]; ok {
		s.lru.MoveToFront(e)
		b := e.Value.(*breaker)
		b.lastUsed = now
		return b
	}
	b := &breaker{id: id, lastUsed: now}
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        id,
		MaxRequests: 1,
		Timeout:     s.cfg.OpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= uint32(s.cfg.Threshold) },
		IsExcluded:  func(err error) bool { return errors.Is(err, errNotAttempted) },
		// Called with gobreaker's lock held: only touch our own atomics.
		OnStateChange: func(_ string, _, to gobreaker.State) {
			switch to {
			case gobreaker.StateOpen:
				trips := b.trips.Add(1)
				now := time.Now()
				if trips == 1 {
					b.openedAt.Store(now.UnixNano())
				}
				until := now.Add(s.openFor(trips))
				b.openUntil.Store(until.UnixNano())
				if s.onTrip != nil {
					s.onTrip(b.id, until)
				}
			case gobreaker.StateClosed:
				b.trips.Store(0)
				b.openUntil.Store(0)
				b.openedAt.Store(0)
			}
		},
	})
	s.m[id] = s.lru.PushFront(b)
	s.evict(now)
	return b
}

// evict drops the LRU tail while over the bound, and closed breakers idle
// too long from the tail (amortised: a few per call).
func (s *breakers) evict(now time.Time) {
	for len(s.m) > s.cfg.MaxBreakers {
		s.remove(s.lru.Back())
	}
	for range 4 {
		e := s.lru.Back()
		if e == nil {
			return
		}
		b := e.Value.(*breaker)
		if now.Sub(b.lastUsed) < s.cfg.IdleAfter || b.cb.State() != gobreaker.StateClosed {
			return
		}
		s.remove(e)
	}
}

func (s *breakers) remove(e *list.Element) {
	b := s.lru.Remove(e).(*breaker)
	delete(s.m, b.id)
}

// openFor is the open period after the given number of consecutive trips:
// OpenFor doubling, capped at MaxOpenFor.
func (s *breakers) openFor(trips int32) time.Duration {
	d := s.cfg.OpenFor
	for i := int32(1); i < trips && d < s.cfg.MaxOpenFor; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxOpenFor)
}

func (s *breakers) openPeriod(b *breaker) time.Duration { return s.openFor(max(b.trips.Load(), 1)) }

// spread returns a time in [at, at+period): deliveries put off together
// come back spread over a period instead of as one wall in front of other
// work (a half-open probe decides the breaker early in that period; the
// rest then see it closed, or open again for longer).
func spread(at time.Time, period time.Duration) time.Time {
	if p := int64(period); p > 0 {
		return at.Add(time.Duration(rand.Int64N(p)))
	}
	return at
}
