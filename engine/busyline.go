package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Waiting for a busy subscription costs nothing but memory (issue 22). A
// delivery that finds its subscription at its in-flight limit on this
// replica waits for one of this replica's own sends to that subscription
// to end: a local event, usually within one send's time. So instead of
// being put off (its record written, a wake-up published, the item acked,
// and all of it read again when the wake-up fires), it is parked here, in
// the subscription's wait line: the work item stays unacked, kept alive by
// keepAlive as it was while it waited for a worker, and nothing is read,
// written or published. When a send of the subscription ends (or its limit
// grows), the line hands its oldest items, as many as the subscription has
// free slots, to the workers (the woken lane), and each is handled again
// from the start: its record is read afresh and admission runs again, so a
// breaker that opened meanwhile, a paused subscription or a duplicate that
// already succeeded is seen as before. A delivery arriving while the line
// holds anyone, or while a woken one is on its way to a slot, does not ask
// for a slot: it parks behind them, or is put off if the line is full, so
// a replica sends a subscription's deliveries in the order they found it
// busy, and a put-off delivery coming back never takes the slot a parked
// one was woken for (measured before this rule: 200 deliveries to a
// 100 ms receiver at limit 2 took 24 s instead of 10, parked deliveries
// losing every race to returning ones).
//
// Parking is bounded so it can neither hold the consumer's MaxAckPending
// slots that healthy subscriptions need nor grow memory with a backlog:
//
//   - a subscription parks at most parkPerSlot items per slot of its limit
//     (a fast one's spilled deliveries: under 1/spillShare of the
//     replica's parks, spillBusy), all subscriptions together at most
//     MaxAckPending/parkShare per replica;
//   - an item is parked for parkFor at most, and never when that would take
//     it past its stale cutoff. (Its schedule's end bounds a breaker's
//     hold, decision 8; a busy subscription's put-off never observed it,
//     and a delivery still busy after parkFor takes that put-off path.)
//
// Past a cap, or once its time is up, a delivery takes the put-off path
// unchanged (wait: a subscription_busy wake-up). Ordered lines' items never
// park: their waits stay in their line (ordered.go). On shutdown the
// parked items are released at once (nak), as buffered work is, so another
// replica takes them now rather than after AckWait.
//
// A parked delivery is not reported as put off (Observer, the
// postponed-deliveries counter) and its record does not change: it has not
// been put off, only not sent yet. ParkStats counts the parks.

const (
	// parkPerSlot is how many deliveries a subscription may park per slot
	// of its in-flight limit: enough for a few rounds of its sends, not a
	// backlog.
	parkPerSlot = 8
	// parkShare: one replica parks at most 1/parkShare of the consumer's
	// MaxAckPending, so healthy subscriptions keep the rest.
	parkShare = 10
	// parkFor bounds how long a delivery stays parked before it is put
	// off instead (a receiver slower than parkFor/parkPerSlot per send
	// falls back to the put-off's virtual queue).
	parkFor = 5 * time.Second
)

// parked is what a parked work item carries back to the worker that handles
// it when it leaves its line.
type parked struct {
	sub   string
	since time.Time // parked first; kept when it parks again at the front
	// woken: handed out for a free slot and not yet at admission (counted
	// in its line's transit).
	woken bool
	// expired: parked for parkFor; if the subscription is still busy it
	// is put off, not parked again.
	expired bool
}

// busyLines are this replica's wait lines of busy subscriptions.
type busyLines struct {
	room    func(sub string) (room, limit int) // adaptive.Pool.Room
	most    int                                // parked items at most, all lines
	woken   chan queued                        // items leaving their line, for the workers
	parks   atomic.Uint64
	spills  atomic.Uint64
	expired atomic.Uint64

	mu     sync.Mutex
	lines  map[string]*busyLine
	parked int // items in lines or in woken
	closed bool
}

// busyLine is one subscription's wait line.
type busyLine struct {
	items []queued // oldest first
	// transit counts items woken for a free slot that have not reached
	// admission yet: the slots they are heading for are taken.
	transit int
}

func newBusyLines(maxAckPending int, room func(string) (int, int)) *busyLines {
	most := max(1, maxAckPending/parkShare)
	return &busyLines{room: room, most: most, woken: make(chan queued, most), lines: map[string]*busyLine{}}
}

// Places in a line.
type place int

const (
	placeBack   place = iota // refused a slot: last in line
	placeFront               // woken, and refused again: first in line, as it was
	placeBehind              // not asked for a slot: last, only if the line holds anyone
	placeSpill               // a fast subscription's, refused a slot with no short wait: last, while the line holds under 1/spillShare of the replica's parks
)

// spillShare: a fast subscription's line takes spilled deliveries
// (spillBusy) while it holds fewer than 1/spillShare of what the replica
// may park, whatever its limit: the limit is cut while the machine is
// saturated (its answers wait for a CPU) just when most of its deliveries
// are refused, and the line drains within milliseconds per slot; a fast
// subscription whose limit grew large still leaves three quarters of the
// parks to the others.
const spillShare = 4

// enter parks q in sub's line at pl, unless the caps are reached, the
// lines are closed or (placeBehind) nobody is ahead. ahead reports whether
// anyone is (parked, or woken and on its way to a slot). It wakes as many
// of the line's first items as there are free slots, which covers a send
// that ended between the refusal and the park.
func (b *busyLines) enter(q queued, sub string, since time.Time, pl place) (ok, ahead bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lines[sub]
	ahead = l != nil && (len(l.items) > 0 || l.transit > 0)
	if b.closed || pl == placeBehind && !ahead || b.parked >= b.most {
		return false, ahead
	}
	room, limit := b.room(sub)
	if l == nil {
		l = &busyLine{}
		b.lines[sub] = l
	}
	most := parkPerSlot * max(1, limit)
	if pl == placeSpill {
		most = max(1, b.most/spillShare)
	}
	if pl != placeFront && len(l.items) >= most {
		b.tidy(sub, l)
		return false, ahead
	}
	q.parked = &parked{sub: sub, since: since}
	if pl == placeFront {
		// Back where it was: before every item parked after it, so the
		// line stays in park order (expire looks at its first items only)
		// even when woken items are refused again in another order.
		at := 0
		for at < len(l.items) && !l.items[at].parked.since.After(since) {
			at++
		}
		l.items = slices.Insert(l.items, at, q)
	} else {
		l.items = append(l.items, q)
	}
	b.parked++
	b.parks.Add(1)
	if pl == placeSpill {
		b.spills.Add(1)
	}
	b.wake(sub, l, room)
	return true, ahead
}

// wake hands l's first items to the workers while sub has free slots no
// woken item is heading for, b.mu held.
func (b *busyLines) wake(sub string, l *busyLine, room int) {
	for l.transit < room && len(l.items) > 0 {
		q := l.items[0]
		l.items[0] = queued{}
		l.items = l.items[1:]
		q.parked.woken = true
		l.transit++
		b.woken <- q // never blocks: it holds at most b.parked ≤ b.most items
	}
	b.tidy(sub, l)
}

// tidy forgets an empty line, b.mu held.
func (b *busyLines) tidy(sub string, l *busyLine) {
	if len(l.items) == 0 && l.transit == 0 {
		delete(b.lines, sub)
	}
}

// freed is called when a slot of sub frees (a send ended, or a woken item
// took one and the limit may have room for more).
func (b *busyLines) freed(sub string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.lines[sub]; l != nil && len(l.items) > 0 {
		room, _ := b.room(sub)
		b.wake(sub, l, room)
	}
}

// arrived marks a woken item at admission: its slot is its own to take
// now. It reports whether p was woken for a slot.
func (b *busyLines) arrived(p *parked) bool {
	if p == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !p.woken {
		return false
	}
	p.woken = false
	if l := b.lines[p.sub]; l != nil {
		l.transit--
		b.tidy(p.sub, l)
	}
	return true
}

// done ends the handling of an item that left its line. One woken for a
// slot that never reached admission (its delivery already final, a Redis
// error) passes the slot on to the next in line.
func (b *busyLines) done(p *parked) {
	if p == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !p.woken {
		return
	}
	p.woken = false
	if l := b.lines[p.sub]; l != nil {
		l.transit--
		room, _ := b.room(p.sub)
		b.wake(p.sub, l, room)
	}
}

// took counts out an item a worker took from woken.
func (b *busyLines) took() {
	b.mu.Lock()
	b.parked--
	b.mu.Unlock()
}

// expire hands the items parked for parkFor to the workers, to be put off
// if their subscription is still busy. A line is in park order, so only
// its first items can be due.
func (b *busyLines) expire(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for sub, l := range b.lines {
		for len(l.items) > 0 && now.Sub(l.items[0].parked.since) >= parkFor {
			q := l.items[0]
			l.items[0] = queued{}
			l.items = l.items[1:]
			q.parked.expired = true
			b.expired.Add(1)
			b.woken <- q
		}
		b.tidy(sub, l)
	}
}

// run expires items until ctx is done, then closes the lines.
func (b *busyLines) run(ctx context.Context) {
	t := time.NewTicker(parkFor / 8)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.close()
			return
		case now := <-t.C:
			b.expire(now)
		}
	}
}

// close releases every parked item (and every woken one no worker took)
// for immediate redelivery, and parks nothing more.
func (b *busyLines) close() {
	b.mu.Lock()
	b.closed = true
	var out []queued
	for _, l := range b.lines {
		out = append(out, l.items...)
	}
	b.lines = map[string]*busyLine{}
	for len(b.woken) > 0 {
		out = append(out, <-b.woken)
	}
	b.parked -= len(out)
	b.mu.Unlock()
	for _, q := range out {
		q.withdraw()
		release(q.m)
	}
}

// ParkStats counts the deliveries this replica parked in memory while
// their subscription was at its in-flight limit here, instead of putting
// them off.
type ParkStats struct {
	// Parked is how many wait now.
	Parked int
	// Parks counts the parks since the start (a woken delivery refused
	// again parks again).
	Parks uint64
	// Spills counts the parks of a fast subscription's deliveries refused
	// a slot with no short busy wait given (spillBusy; among Parks).
	Spills uint64
	// Expired counts the parked deliveries whose subscription stayed busy
	// for parkFor (5 s): they are handled again, and put off if it still
	// is (a fast subscription's may take a short busy wait instead).
	Expired uint64
}

// ParkStats reports the deliveries parked for a busy subscription.
func (e *Engine) ParkStats() ParkStats {
	b := e.busy
	b.mu.Lock()
	n := b.parked
	b.mu.Unlock()
	return ParkStats{Parked: n, Parks: b.parks.Load(), Spills: b.spills.Load(), Expired: b.expired.Load()}
}

// parkable reports whether h may wait parked (see above): not an ordered
// line's item, not one whose park time is up, and not past its stale
// cutoff before parkFor. (A breaker's hold ends at the schedule's end; a
// busy subscription's put-off never did, and a parked delivery is put off
// after parkFor.)
func (e *Engine) parkable(h *handling, since time.Time) bool {
	if h.line != nil || h.item.parked != nil && h.item.parked.expired {
		return false
	}
	return since.Add(parkFor).Before(e.staleAt(h))
}

// waitBehind keeps h from taking a slot that the deliveries already
// waiting for its busy subscription are owed: it parks behind them or,
// when the line is full, is put off. ok is false when nobody waits ahead
// of it, h may not park, or the subscription answers fast: it asks for a
// slot.
//
// A line a subscription started before it was known to answer fast (its
// first sends still running when a backlog arrived) is not waited behind
// once it is: its newcomers, arriving faster than the line drained, kept
// it alive for the whole backlog and were put off by the thousand when it
// was full (measured: draining a preloaded backlog to one fast receiver,
// most deliveries were turned away once, in some runs). The line's own
// deliveries still go out as slots free, or when their time parked is up.
func (e *Engine) waitBehind(h *handling, woke bool) (settlement, bool) {
	sub := h.delivery().SubscriptionID
	if woke || !e.parkable(h, h.now) || e.inflight.pool.Fast(sub) {
		return settlement{}, false
	}
	parked, ahead := e.busy.enter(h.item, sub, h.now, placeBehind)
	switch {
	case parked:
		return parkedInLine(), true
	case ahead:
		return e.wait(h, e.inflight.pool.TurnAway(sub), reasonBusy), true
	}
	return settlement{}, false
}

// parkBusy parks h, refused a slot: a woken delivery first in line again,
// any other last.
//
// A subscription that answers fast (adaptive.Pool.Fast) starts no line here
// (only spillBusy parks its deliveries, once the budget of short busy
// waits is spent): it
// frees a slot within milliseconds, and workers wait for one in Acquire; a
// delivery still refused one is put off. Parking it would put every later
// delivery behind the line, its hand-offs and its put-offs when full
// (measured: a fast receiver's preloaded backlog went out at half the
// rate, one subscription or ten). A line started while the subscription
// was slow drains as its slots free, but once the subscription is known
// fast its newcomers no longer park behind it (waitBehind): they may take
// a slot a parked delivery was woken for, which then parks again at the
// front, or, its time parked up, is put off.
func (e *Engine) parkBusy(h *handling, woke bool) bool {
	since, pl := h.now, placeBack
	if woke {
		since, pl = h.item.parked.since, placeFront
	}
	if !e.parkable(h, since) || e.inflight.pool.Fast(h.delivery().SubscriptionID) {
		return false
	}
	ok, _ := e.busy.enter(h.item, h.delivery().SubscriptionID, since, pl)
	return ok
}

// spillBusy parks h, a delivery of a fast subscription that frees slots
// now (adaptive.Pool.Freeing), refused a slot with no short busy wait
// given (busyWait: this replica's budget of them spent, or its turn more
// than ParkAfter away), instead of writing its put-off: where it was if it
// was parked before, at the back otherwise, while the line holds under
// 1/spillShare of the replica's parks. Newcomers do not wait behind a fast
// subscription's line (waitBehind), so its parked deliveries take slots
// that free while no worker waits for one, or, their time parked up, are
// handled again and put off if still refused.
//
// Without it, a machine too busy for the budget wrote each refusal as a
// wake-up: a record write, a message schedule (whose rollup purge walks
// every consumer on the dispatch stream) and an ack, and the delivery,
// back a second later, was often refused again. Measured with jetrelay's
// bench confined to one CPU (taskset -c 0 jetrelay bench --scenario
// ordering): ten fast subscriptions beside 100 busy ordered lines were put
// off 160,000–230,000 times for 40,000 deliveries and went out at 21–28 %
// of their rate alone; with it, 109,000–117,000 times and 34–35 %
// (docs/ordering.md).
func (e *Engine) spillBusy(h *handling) bool {
	sub := h.delivery().SubscriptionID
	since, pl := h.now, placeSpill
	if p := h.item.parked; p != nil {
		since, pl = p.since, placeFront
	}
	if h.line != nil || !e.parkable(h, since) || !e.inflight.pool.Freeing(sub) {
		return false
	}
	ok, _ := e.busy.enter(h.item, sub, since, pl)
	return ok
}
