package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/adaptive"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// bareEngine is an engine with default settings on a fresh Redis and
// JetStream, not running: its parts are driven directly.
func bareEngine(t *testing.T) *Engine {
	t.Helper()
	_, _, js := testenv.NATS(t)
	e, err := New(testenv.Redis(t).Client, js, transport.NewRegistry(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A wait line a subscription started before it was known to answer fast
// (its first sends unanswered when a backlog came) holds no newcomer once
// it is: they ask for a slot, as a fast subscription's deliveries do. A
// subscription not known fast still has its newcomers wait behind its
// line. The state is set up directly: both subscriptions at their limit
// (so nothing in a line is woken), one of them with a fast answer on
// record, and one delivery in each line.
func TestWaitBehind_AFastSubscriptionsNewcomersDoNotWaitBehindAnOldLine(t *testing.T) {
	e := bareEngine(t)
	ctx := context.Background()
	pool := e.inflight.pool
	fill := func(sub string) {
		t.Helper()
		for {
			if room, _ := pool.Room(sub); room == 0 {
				return
			}
			if ok, _ := pool.Acquire(ctx, sub); !ok {
				t.Fatalf("slot of %s refused before its limit", sub)
			}
		}
	}
	fill("fast")
	pool.Release("fast", time.Millisecond, adaptive.Healthy) // a fast answer on record
	fill("fast")
	fill("new")
	if !pool.Fast("fast") || pool.Fast("new") {
		t.Fatalf("Fast: fast %v, new %v; want only the first known fast", pool.Fast("fast"), pool.Fast("new"))
	}

	now := time.Now()
	for _, sub := range []string{"fast", "new"} {
		if ok, _ := e.busy.enter(queued{}, sub, now, placeBack); !ok {
			t.Fatalf("no line started for %s", sub)
		}
	}
	newcomer := func(sub string) *handling {
		d := &proto.Delivery{DeliveryID: "d-" + sub, SubscriptionID: sub, EventID: "e"}
		return &handling{rec: &store.DeliveryRecord{Delivery: d}, now: now, log: newHandlingLog(e.log, d.DeliveryID)}
	}
	if s, held := e.waitBehind(newcomer("fast"), false); held {
		t.Errorf("a fast subscription's newcomer was held behind its old line (settlement %+v); want it to ask for a slot", s)
	}
	if s, held := e.waitBehind(newcomer("new"), false); !held || s.kind != settleParked {
		t.Errorf("a newcomer of a subscription not known fast got %+v, held %v; want it parked behind the line", s, held)
	}
	if st := e.ParkStats(); st.Parked != 3 {
		t.Errorf("parked = %+v, want 3 (the two lines' first and the slow one's newcomer)", st)
	}
}

// A delivery refused a slot of a subscription that answers fast and frees
// slots now waits as a short delayed nak: it comes back when the
// subscription's virtual queue says, a worker's wait for such a slot
// (fastAnswer) at the earliest, not BusyWaitMin later. Any other busy wait
// (a subscription not known fast, an ordered line's item, a wait longer
// than ParkAfter, one past the replica's budget of short waits) is written
// or waits in its line (or, while its subscription frees slots, parks:
// spillBusy), and waits BusyWaitMin at least: each of its
// returns costs a record write and a wake-up.
func TestBusyWait_OnlyAFastSubscriptionsShortWaitComesBackBeforeBusyWaitMin(t *testing.T) {
	e := bareEngine(t)
	ctx := context.Background()
	pool := e.inflight.pool
	// answered gives fast an answer of 1 ms just now: it frees slots
	// (adaptive.Pool.Freeing looks back fastAnswer, so each case asks
	// right before it runs, however slowly the test runs).
	answered := func() {
		t.Helper()
		if ok, _ := pool.Acquire(ctx, "fast"); !ok {
			t.Fatal("a slot of fast refused")
		}
		pool.Release("fast", time.Millisecond, adaptive.Healthy)
	}
	if ok, _ := pool.Acquire(ctx, "slow"); !ok { // a send running, no answer yet
		t.Fatal("first slot of slow refused")
	}
	handlingFor := func(sub string, ln *line) *handling {
		d := &proto.Delivery{DeliveryID: "d-" + sub, SubscriptionID: sub, EventID: "e"}
		return &handling{ctx: ctx, rec: &store.DeliveryRecord{Delivery: d}, now: time.Now(), log: newHandlingLog(e.log, d.DeliveryID), line: ln}
	}
	floor := e.cfg.BusyWaitMin

	// Through wait: a delayed nak of a worker's wait, nothing written.
	answered()
	h := handlingFor("fast", nil)
	if s := e.wait(h, h.now.Add(5*time.Millisecond), reasonBusy); s.kind != settleShortNak || s.delay > fastAnswer {
		t.Errorf("a fast subscription's busy wait due in 5ms settled as %+v; want a delayed nak of %s at most", s, fastAnswer)
	}

	for _, tc := range []struct {
		name      string
		sub       string
		ln        *line
		in        time.Duration // back, from now
		budget    int           // short waits left (-1: the default)
		wantShort bool
		want      time.Duration // when it comes back, from now; 0: BusyWaitMin at least
	}{
		{"fast, due in 5ms", "fast", nil, 5 * time.Millisecond, -1, true, fastAnswer},
		{"fast, due in 300ms", "fast", nil, 300 * time.Millisecond, -1, true, 300 * time.Millisecond},
		{"fast, due past ParkAfter", "fast", nil, e.cfg.ParkAfter + time.Second, -1, false, 0},
		{"fast, an ordered line's item", "fast", &line{}, 5 * time.Millisecond, -1, false, 0},
		{"fast, the budget spent", "fast", nil, 5 * time.Millisecond, 0, false, 0},
		{"not known fast, due in 5ms", "slow", nil, 5 * time.Millisecond, -1, false, 0},
	} {
		if tc.budget >= 0 {
			e.shortBusy = &shortNaks{window: time.Hour, most: tc.budget}
		}
		answered()
		h := handlingFor(tc.sub, tc.ln)
		until, short := e.busyWait(h, h.now.Add(tc.in))
		switch {
		case short != tc.wantShort:
			t.Errorf("%s: short wait %v, want %v", tc.name, short, tc.wantShort)
		case short && until.Sub(h.now) != tc.want:
			t.Errorf("%s: comes back %s after it was refused, want %s", tc.name, until.Sub(h.now), tc.want)
		case !short && until.Before(h.now.Add(floor)):
			t.Errorf("%s: a written busy wait comes back %s after it was refused, want BusyWaitMin (%s) at least", tc.name, until.Sub(h.now), floor)
		}
	}
}

// A fast subscription's delivery refused a slot once the replica's budget
// of short busy waits is spent is parked in the subscription's wait line:
// it settles as parked (nothing written, published or acked, the
// settlement that keeps the item alive unacked), and a freed slot hands it
// to a worker. One refused again goes back to its place in park order,
// even when woken deliveries are refused in another order (the line's
// first items are the ones whose park time is up first). An ordered
// line's item is never parked this way, nor, once its line holds its
// share of the replica's parks, a fast subscription's next delivery, nor
// one of a subscription no longer freeing slots (its sends unanswered for
// FastAnswer): those are put off as before. The state is set up directly,
// on a pool with a clock that only the test moves: the subscription at
// its limit with a fast answer on record, the budget spent.
func TestSpillBusy_AFastSubscriptionPastTheShortWaitBudgetParksInsteadOfAWakeUp(t *testing.T) {
	e := bareEngine(t)
	ctx := context.Background()
	clock := time.Now()
	pool := adaptive.NewPool(adaptive.PoolConfig{Workers: e.workers.most, Initial: 4, FastAnswer: fastAnswer, Now: func() time.Time { return clock }})
	e.inflight.pool, e.busy.room = pool, pool.Room
	fill := func() {
		t.Helper()
		for {
			if room, _ := pool.Room("fast"); room == 0 {
				return
			}
			if ok, _ := pool.Acquire(ctx, "fast"); !ok {
				t.Fatal("slot refused before the limit")
			}
		}
	}
	if ok, _ := pool.Acquire(ctx, "fast"); !ok {
		t.Fatal("first slot refused")
	}
	pool.Release("fast", time.Millisecond, adaptive.Healthy) // known fast, freeing slots
	fill()
	e.shortBusy = &shortNaks{window: time.Hour, most: 0}
	n := 0
	handlingFor := func(ln *line) *handling {
		n++
		d := &proto.Delivery{DeliveryID: fmt.Sprintf("d-%d", n), SubscriptionID: "fast", EventID: "e"}
		return &handling{ctx: ctx, rec: &store.DeliveryRecord{Delivery: d}, now: time.Now().Add(time.Duration(n) * time.Millisecond),
			log: newHandlingLog(e.log, d.DeliveryID), line: ln}
	}

	first, second := handlingFor(nil), handlingFor(nil)
	for _, h := range []*handling{first, second} {
		if s := e.wait(h, h.now.Add(5*time.Millisecond), reasonBusy); s.kind != settleParked {
			t.Fatalf("refused past the budget, settled as %+v; want parked", s)
		}
	}
	if st := e.ParkStats(); st.Parked != 2 || st.Spills != 2 {
		t.Fatalf("park stats %+v; want 2 parked, both spilled", st)
	}
	if e.spillBusy(handlingFor(&line{})) {
		t.Error("an ordered line's item was parked in the subscription's wait line")
	}

	// Two slots free: both parked deliveries are handed to the workers.
	for range 2 {
		e.inflight.release("fast", time.Millisecond, nil)
	}
	var woken []queued
	for range 2 {
		select {
		case q := <-e.busy.woken:
			e.busy.took()
			if q.parked == nil || !e.busy.arrived(q.parked) {
				t.Fatalf("woken item %+v; want a parked delivery, woken for a slot", q.parked)
			}
			woken = append(woken, q)
		case <-time.After(10 * time.Second):
			t.Fatal("a freed slot woke nobody")
		}
	}
	fill() // newcomers take the freed slots (and any the answers added)
	// Refused again, the one parked first is refused first: put at the
	// front one after the other they would end up in reverse; the line
	// keeps park order.
	third := handlingFor(nil)
	if !e.spillBusy(third) {
		t.Fatal("a newcomer was not parked")
	}
	for _, q := range woken {
		h := handlingFor(nil)
		h.item = q
		if !e.spillBusy(h) {
			t.Fatal("a woken delivery refused again was not parked")
		}
	}
	l := e.busy.lines["fast"]
	var order []time.Time
	for _, q := range l.items {
		order = append(order, q.parked.since)
	}
	if want := []time.Time{first.now, second.now, third.now}; !slices.EqualFunc(order, want, time.Time.Equal) {
		t.Errorf("line parked since %v; want %v (park order)", order, want)
	}

	// The line holds its share of the replica's parks: the next is put off.
	share := e.busy.most / spillShare
	for len(l.items) < share {
		if !e.spillBusy(handlingFor(nil)) {
			t.Fatalf("refused at %d parked; want room for %d", len(l.items), share)
		}
	}
	if !pool.Freeing("fast") {
		t.Fatal("the subscription stopped freeing slots")
	}
	if e.spillBusy(handlingFor(nil)) {
		t.Errorf("parked past the line's share (%d of the replica's %d)", share, e.busy.most)
	}

	// A subscription whose sends have gone unanswered for FastAnswer frees
	// no slots: its deliveries are not spilled, however much room.
	clock = clock.Add(2 * fastAnswer)
	if ok, _ := pool.Acquire(ctx, "other"); !ok {
		t.Fatal("slot of other refused")
	}
	pool.Release("other", time.Millisecond, adaptive.Healthy)
	fillOther := func() {
		for {
			if room, _ := pool.Room("other"); room == 0 {
				return
			}
			pool.Acquire(ctx, "other")
		}
	}
	fillOther()
	clock = clock.Add(2 * fastAnswer)
	d := &proto.Delivery{DeliveryID: "d-other", SubscriptionID: "other", EventID: "e"}
	h := &handling{ctx: ctx, rec: &store.DeliveryRecord{Delivery: d}, now: time.Now(), log: newHandlingLog(e.log, d.DeliveryID)}
	if !pool.Fast("other") || pool.Freeing("other") {
		t.Fatalf("other: fast %v, freeing %v; want fast and not freeing", pool.Fast("other"), pool.Freeing("other"))
	}
	if e.spillBusy(h) {
		t.Error("a delivery of a subscription freeing no slots was spilled")
	}
}
