package engine

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keepAlive tells the server that work items are still being worked on, so
// a slow send, or a long wait for a room in a lane or for a worker, never
// outlives AckWait and reaches a second replica. One goroutine serves every
// worker: the fetch registers an item the moment it returns it (pull, before
// it waits in the engine's fetch buffer and in a lane) and the worker
// withdraws it when it settles; the item is signalled every `every` in
// between, the first time `every` after it was registered. No item the
// engine holds waits unregistered anywhere (fetch.go).
//
// Signals are sent under the same lock that withdraws an item, so none is
// sent after withdraw returns: an in-progress signal sent after the final
// nak would reset the nak's delay on the server.
type keepAlive struct {
	every time.Duration
	mu    sync.Mutex
	items map[*alive]struct{}
}

type alive struct {
	m    jetstream.Msg
	next time.Time
}

func newKeepAlive(every time.Duration) *keepAlive {
	return &keepAlive{every: every, items: make(map[*alive]struct{})}
}

// track registers m and returns the function that withdraws it.
func (k *keepAlive) track(m jetstream.Msg) (withdraw func()) {
	a := &alive{m: m, next: time.Now().Add(k.every)}
	k.mu.Lock()
	k.items[a] = struct{}{}
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		delete(k.items, a)
		k.mu.Unlock()
	}
}

// run signals due items until ctx is done, looking every `every`/8 so that
// no item waits much past its due time.
func (k *keepAlive) run(ctx context.Context) {
	t := time.NewTicker(max(k.every/8, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			k.signal(now)
		}
	}
}

func (k *keepAlive) signal(now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for a := range k.items {
		if now.Before(a.next) {
			continue
		}
		_ = a.m.InProgress()
		a.next = now.Add(k.every)
	}
}
