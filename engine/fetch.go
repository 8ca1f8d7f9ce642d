package engine

import (
	"context"
	"errors"
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
// own buffer (at most Workers items, as the iterator's was) until a lane
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

// fetched is the engine's buffer between the fetches and the lanes. room
// holds one token per free place; a fetch reserves the tokens it asks for,
// gives back those it got no item for, and the feeder gives one back per
// item it hands on, so a fetch never brings more than fits in items.
type fetched struct {
	items chan queued
	room  chan struct{}
}

func newFetched(size int) *fetched {
	f := &fetched{items: make(chan queued, size), room: make(chan struct{}, size)}
	for range size {
		f.room <- struct{}{}
	}
	return f
}

// reserve waits until at least half of f is free and takes all the room
// there is; it returns 0 once ctx is done. Waiting for half (as the client's
// iterator refills at half its buffer) keeps fetches large under load, one
// round trip per many items rather than per item; it never starves the
// workers, since while it waits f still holds half its items to hand on.
func (f *fetched) reserve(ctx context.Context) int {
	n := 0
	for n < (cap(f.room)+1)/2 {
		select {
		case <-f.room:
			n++
		case <-ctx.Done():
			f.unreserve(n)
			return 0
		}
	}
	for n < cap(f.room) {
		select {
		case <-f.room:
			n++
		default:
			return n
		}
	}
	return n
}

// unreserve gives back n places.
func (f *fetched) unreserve(n int) {
	for range n {
		f.room <- struct{}{}
	}
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
