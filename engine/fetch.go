package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The engine pulls its work with one fetch at a time, each asking for no more
// items than it has room for (fetched), rather than through the client's
// streaming iterator (Consume, Messages). The iterator prefetches into a
// buffer of its own, out of the engine's reach: an item waiting there (while
// the lanes are full behind slow sends) cannot be kept alive, and once it
// outlived AckWait the server handed it to another replica while this one
// still held it, two copies of one work item. A fetched item is registered
// with keepAlive the moment the fetch returns it, and waits in the engine's
// own buffer (as many items as the live workers, as the iterator's was,
// at most maxBuffer: workers.buffer) until a lane
// has room.
const (
	// fetchExpiry bounds one fetch on an idle stream: a fetch that gets
	// fewer items than it asked for ends after this long and the next one
	// asks again, with the room there is then.
	fetchExpiry = 5 * time.Second
	// fetchHeartbeat is how often the server tells a waiting fetch it is
	// still there: two missed ones end the fetch (its consumer leader died,
	// the connection broke) and the next fetch finds the new leader
	// (measured with the iterator's equivalent settings: ~5 s instead of
	// ~30 s on an R3 stream whose leader was killed).
	fetchHeartbeat = time.Second
)

// fetched is the engine's buffer between the fetches and the lanes. Its
// size follows the worker pool's live size (workers.buffer), up to the
// capacity of items. used counts the places reserved or holding an item; a
// fetch reserves the places it asks for, gives back those it got no item
// for, and the feeder gives one back per item it hands on, so a fetch
// never brings more than fits.
type fetched struct {
	items chan queued
	size  func() int
	mu    sync.Mutex
	used  int
	freed chan struct{} // signalled when places are given back or the size grows
}

// newFetched returns a buffer of a fixed size.
func newFetched(size int) *fetched {
	return newSizedFetched(size, func() int { return size })
}

// newSizedFetched returns a buffer whose size follows size(), at most most.
func newSizedFetched(most int, size func() int) *fetched {
	return &fetched{items: make(chan queued, most), size: size, freed: make(chan struct{}, 1)}
}

// reserve waits until at least half of f is free and takes all the room
// there is; it returns 0 once ctx is done. Waiting for half (as the client's
// iterator refills at half its buffer) keeps fetches large under load, one
// round trip per many items rather than per item; it never starves the
// workers, since while it waits f still holds half its items to hand on.
func (f *fetched) reserve(ctx context.Context) int {
	for ctx.Err() == nil {
		f.mu.Lock()
		size := min(f.size(), cap(f.items))
		if free := size - f.used; free > 0 && free >= (size+1)/2 {
			f.used += free
			f.mu.Unlock()
			return free
		}
		f.mu.Unlock()
		select {
		case <-f.freed:
		case <-ctx.Done():
		}
	}
	return 0
}

// unreserve gives back n places.
func (f *fetched) unreserve(n int) {
	f.mu.Lock()
	f.used -= n
	f.mu.Unlock()
	f.roomChanged()
}

// roomChanged tells a reserve waiting for room to look again.
func (f *fetched) roomChanged() {
	select {
	case f.freed <- struct{}{}:
	default:
	}
}

// free is how many places are free now.
func (f *fetched) free() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return min(f.size(), cap(f.items)) - f.used
}

// pull fetches items into f until ctx is done (nil) or a fetch fails in a
// way that needs the consumer opened again (the error). An item is kept
// alive from the moment the fetch hands it over.
func (e *Engine) pull(ctx context.Context, cons jetstream.Consumer, f *fetched) error {
	for {
		n := f.reserve(ctx)
		if n == 0 {
			return nil
		}
		fctx, cancel := context.WithTimeout(ctx, fetchExpiry)
		batch, err := cons.Fetch(n, jetstream.FetchContext(fctx), jetstream.FetchHeartbeat(fetchHeartbeat))
		if err != nil {
			cancel()
			f.unreserve(n)
			return err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			f.items <- queued{m: m, withdraw: e.alive.track(m)}
		}
		cancel()
		f.unreserve(n - got)
		switch err := batch.Error(); {
		case err == nil, ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, jetstream.ErrNoHeartbeat):
			// The consumer's leader moved or the connection broke: the next
			// fetch goes to whoever leads it now.
			e.log.Warn("consumer fetch lost its heartbeat; fetching again", "err", err)
		default:
			return err
		}
	}
}

// feed hands the fetched items to the lanes, in the order they came, until
// f.items is closed. Once ctx is done it releases them instead, so another
// replica can take them now rather than after AckWait.
func (e *Engine) feed(ctx context.Context, f *fetched, work *lanes) {
	for q := range f.items {
		if ctx.Err() != nil {
			q.withdraw()
			release(q.m)
			f.unreserve(1)
			continue
		}
		q.md, _ = q.m.Metadata()
		back := q.comesBack()
		if !work.put(ctx, q, back) {
			q.withdraw()
			release(q.m)
		} else if back {
			e.taken[laneBack].Add(1)
		} else {
			e.taken[laneNew].Add(1)
		}
		f.unreserve(1)
	}
}
