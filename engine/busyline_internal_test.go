package engine

import (
	"context"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/adaptive"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// A wait line a subscription started before it was known to answer fast
// (its first sends unanswered when a backlog came) holds no newcomer once
// it is: they ask for a slot, as a fast subscription's deliveries do. A
// subscription not known fast still has its newcomers wait behind its
// line. The state is set up directly: both subscriptions at their limit
// (so nothing in a line is woken), one of them with a fast answer on
// record, and one delivery in each line.
func TestWaitBehind_AFastSubscriptionsNewcomersDoNotWaitBehindAnOldLine(t *testing.T) {
	_, _, js := testenv.NATS(t)
	e, err := New(testenv.Redis(t).Client, js, transport.NewRegistry(), Config{})
	if err != nil {
		t.Fatal(err)
	}
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
		return &handling{rec: &store.DeliveryRecord{Delivery: d}, now: now, log: e.log}
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

// A delivery refused a slot comes back when its subscription's virtual
// queue says if the subscription answers fast and frees slots now: its
// wait is a short delayed nak, over within a send's time. Any other busy
// wait (a subscription not known fast, an ordered line's item, a wait
// longer than ParkAfter) is written, and waits BusyWaitMin at least: each
// of its returns costs a record write and a wake-up.
func TestBusyWait_OnlyAFastSubscriptionsShortWaitComesBackBeforeBusyWaitMin(t *testing.T) {
	_, _, js := testenv.NATS(t)
	e, err := New(testenv.Redis(t).Client, js, transport.NewRegistry(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pool := e.inflight.pool
	if ok, _ := pool.Acquire(ctx, "fast"); !ok {
		t.Fatal("first slot of fast refused")
	}
	pool.Release("fast", time.Millisecond, adaptive.Healthy) // answered fast just now: freeing slots
	if ok, _ := pool.Acquire(ctx, "slow"); !ok {             // a send running, no answer yet
		t.Fatal("first slot of slow refused")
	}
	handlingFor := func(sub string, ln *line) *handling {
		d := &proto.Delivery{DeliveryID: "d-" + sub, SubscriptionID: sub, EventID: "e"}
		return &handling{rec: &store.DeliveryRecord{Delivery: d}, now: time.Now(), log: e.log, line: ln}
	}
	floor := e.cfg.BusyWaitMin
	for _, tc := range []struct {
		name      string
		h         *handling
		in        time.Duration // back, from now
		wantShort bool
	}{
		{"fast, due in 5ms", handlingFor("fast", nil), 5 * time.Millisecond, true},
		{"fast, due past ParkAfter", handlingFor("fast", nil), e.cfg.ParkAfter + time.Second, false},
		{"fast, an ordered line's item", handlingFor("fast", &line{}), 5 * time.Millisecond, false},
		{"not known fast, due in 5ms", handlingFor("slow", nil), 5 * time.Millisecond, false},
	} {
		back := tc.h.now.Add(tc.in)
		until, short := e.busyWait(tc.h, back)
		switch {
		case short != tc.wantShort:
			t.Errorf("%s: short wait %v, want %v", tc.name, short, tc.wantShort)
		case short && !until.Equal(back):
			t.Errorf("%s: comes back %s after it was refused, want %s (its virtual queue's time)", tc.name, until.Sub(tc.h.now), tc.in)
		case !short && until.Before(tc.h.now.Add(floor)):
			t.Errorf("%s: a written busy wait comes back %s after it was refused, want BusyWaitMin (%s) at least", tc.name, until.Sub(tc.h.now), floor)
		}
	}
}
