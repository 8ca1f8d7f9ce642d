package engine

import (
	"context"
	"sync"
	"time"
)

// inflight caps how many sends to one subscription a replica runs at once,
// so a slow or black-holed endpoint can hold at most that many workers and
// the rest of the pool keeps serving everyone else. It tracks each busy
// subscription's recent send latency: a fast subscription at its cap is
// simply waited for (a slot frees within milliseconds), a slow one makes the
// caller put the delivery off instead of tying up a worker.
type inflight struct {
	max     int
	waitFor time.Duration // a subscription answering faster than this is waited for, this long at most
	mu      sync.Mutex
	m       map[string]*subLoad
}

type subLoad struct {
	slots    chan struct{} // one token per running send
	users    int           // goroutines holding or waiting for a slot; the entry goes at 0
	latency  time.Duration // moving average of recent sends
	nextFree time.Time     // when the last delivery turned away can expect a slot
}

func newInflight(max int, waitFor time.Duration) *inflight {
	return &inflight{max: max, waitFor: waitFor, m: make(map[string]*subLoad)}
}

// acquire takes a send slot for subscription id. If none is free and the
// subscription answers quickly, it waits up to waitFor for one. Otherwise it
// returns false and the time the delivery should come back: deliveries
// turned away queue up virtually behind each other, one send time divided by
// the limit apart (guess stands in for the send time until one came back),
// so ten thousand deliveries to a slow endpoint come back about as fast as
// it can take them, not all at once.
func (l *inflight) acquire(ctx context.Context, id string, guess time.Duration) (bool, time.Time) {
	l.mu.Lock()
	s := l.m[id]
	if s == nil {
		s = &subLoad{slots: make(chan struct{}, l.max)}
		l.m[id] = s
	}
	s.users++
	latency := s.latency
	l.mu.Unlock()

	select {
	case s.slots <- struct{}{}:
		return true, time.Time{}
	default:
	}
	// Only a subscription known to answer fast is worth a worker's wait; one
	// whose sends have not come back yet (a black hole) is not.
	if latency > 0 && latency < l.waitFor {
		t := time.NewTimer(l.waitFor)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
			return true, time.Time{}
		case <-t.C:
		case <-ctx.Done():
		}
	}
	if latency == 0 {
		latency = guess
	}
	l.mu.Lock()
	now := time.Now()
	if s.nextFree.Before(now) {
		s.nextFree = now.Add(latency)
	} else {
		s.nextFree = s.nextFree.Add(latency / time.Duration(l.max))
	}
	back := s.nextFree
	l.mu.Unlock()
	l.leave(id, s, 0)
	return false, back
}

// release returns a slot, folding the send's latency (0: no send) into the
// subscription's average.
func (l *inflight) release(id string, took time.Duration) {
	l.mu.Lock()
	s := l.m[id]
	l.mu.Unlock()
	if s == nil {
		return
	}
	<-s.slots
	l.leave(id, s, took)
}

// leave drops one user of s, recording latency; an unused entry is removed
// so memory follows the subscriptions being sent to right now.
func (l *inflight) leave(id string, s *subLoad, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if took > 0 {
		if s.latency == 0 {
			s.latency = took
		} else {
			s.latency += (took - s.latency) / 4
		}
	}
	if s.users--; s.users == 0 {
		delete(l.m, id)
	}
}
