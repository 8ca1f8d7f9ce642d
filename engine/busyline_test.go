package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/proto"
)

// gatedEndpoint holds its first request until open is closed and answers
// every other at once, noting the event ids in the order they came.
type gatedEndpoint struct {
	open   chan struct{}
	opened sync.Once
	mu     sync.Mutex
	got    []string
}

// openGate lets the held request go (once).
func (g *gatedEndpoint) openGate() { g.opened.Do(func() { close(g.open) }) }

func (g *gatedEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.got = append(g.got, r.Header.Get("X-Cycles-Event-Id"))
	first := len(g.got) == 1
	g.mu.Unlock()
	if first {
		select {
		case <-g.open:
		case <-r.Context().Done():
		}
	}
	w.WriteHeader(http.StatusOK)
}

func (g *gatedEndpoint) events() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.got...)
}

// busyPutOffs counts one engine's subscription_busy put-offs.
type busyPutOffs struct {
	mu sync.Mutex
	n  int
}

func (c *busyPutOffs) Sending(engine.Labels)           {}
func (c *busyPutOffs) Sent(engine.Labels, engine.Send) {}
func (c *busyPutOffs) PayloadInvalid(string, string)   {}
func (c *busyPutOffs) Decided(d engine.Decision) {
	if d.Kind == engine.PutOff && d.Reason == "subscription_busy" {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
}

func (c *busyPutOffs) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// busyEnv is a subscription limited to one send at a time on a replica of
// two workers, whose first request is held at the gate, so every later
// delivery finds it busy; one worker is left to handle them, one at a time.
func busyEnv(t *testing.T, drain time.Duration) (*env, *gatedEndpoint, *busyPutOffs, string) {
	t.Helper()
	gate := &gatedEndpoint{open: make(chan struct{})}
	putOffs := &busyPutOffs{}
	e := newEnv(t, envOptions{handler: gate, timeout: 30 * time.Second, engine: func(c *engine.Config) {
		c.MaxInFlight, c.Workers, c.MinWorkers = 1, 2, 2
		c.AttemptTimeout, c.DrainTimeout = 30*time.Second, drain
		c.Observer = putOffs
	}})
	t.Cleanup(gate.openGate) // registered after newEnv's: runs before the engine is stopped
	sub, _, _ := e.subscribe(t, "/custom/gated", nil, nil)
	return e, gate, putOffs, sub
}

// backlog enqueues n deliveries to sub: the first is held at the gate, each
// next one is enqueued once the one before it was parked or put off, so
// they find the subscription busy in enqueue order. It returns their
// events' ids, in that order.
func backlog(t *testing.T, e *env, gate *gatedEndpoint, putOffs *busyPutOffs, sub string, n int) []string {
	t.Helper()
	var events []string
	for i := range n {
		ev := e.event()
		id, err := e.admin.SaveEvent(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		ev.EventID = id
		e.deliver(t, sub, ev, nil)
		events = append(events, id)
		if i == 0 {
			waitFor(t, 10*time.Second, "the first send to reach the gate", func() bool { return len(gate.events()) == 1 })
			continue
		}
		waitFor(t, 10*time.Second, fmt.Sprintf("delivery %d to wait", i+1), func() bool {
			return e.engine.ParkStats().Parks+uint64(putOffs.count()) == uint64(i)
		})
	}
	return events
}

func TestBusy_ABacklogAtItsSubscriptionsLimitWaitsInMemoryAndGoesOutInOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		n           int // deliveries; the first is sent, the others wait
		wantPutOffs int
	}{
		// Limit 1: up to 8 parked (parkPerSlot); the rest are put off.
		{"within the cap", 9, 0},
		{"past the cap", 12, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, gate, putOffs, sub := busyEnv(t, 5*time.Second)
			events := backlog(t, e, gate, putOffs, sub, tc.n)
			parked := tc.n - 1 - tc.wantPutOffs
			if got := putOffs.count(); got != tc.wantPutOffs {
				t.Errorf("%d subscription_busy put-offs (a record write and a wake-up each), want %d: the %d deliveries within the cap must wait in memory", got, tc.wantPutOffs, parked)
			}
			if st := e.engine.ParkStats(); st.Parked != parked {
				t.Errorf("parked = %+v, want %d waiting", st, parked)
			}
			gate.openGate()
			for _, ev := range events {
				if rec := e.final(t, admin.DeliveryID(ev, sub)); rec.Status != proto.DeliverySuccess || rec.Attempts != 1 {
					t.Fatalf("record = %s; want SUCCESS on its one attempt", rec.Raw)
				}
			}
			e.idle(t)
			got := gate.events()
			if len(got) != tc.n {
				t.Fatalf("the receiver got %d requests, want %d (one per delivery)", len(got), tc.n)
			}
			// The parked deliveries go out first, in the order they found
			// the subscription busy; the put-off ones come back later.
			for i := range 1 + parked {
				if got[i] != events[i] {
					t.Fatalf("request %d was event %s, want %s: the wait line must keep the order (got %v, enqueued %v)", i+1, got[i], events[i], got, events)
				}
			}
			if tc.wantPutOffs == 0 {
				if w := e.engine.WorkStats(); w.Back != 0 {
					t.Errorf("work items that came back = %d, want 0: no parked delivery may come back as a wake-up or a redelivery", w.Back)
				}
			}
			if st := e.engine.ParkStats(); st.Parked != 0 {
				t.Errorf("after the backlog, %+v still parked", st)
			}
		})
	}
}

func TestBusy_ParkedDeliveriesAreReleasedAtShutdownForAnotherReplicaAtOnce(t *testing.T) {
	t.Parallel()
	// The held send may drain for up to 30 s: long after the parked
	// deliveries must have gone out through the other replica.
	e, gate, putOffs, sub := busyEnv(t, 30*time.Second)
	events := backlog(t, e, gate, putOffs, sub, 4)
	if n := putOffs.count(); n != 0 {
		t.Fatalf("%d put-offs before the shutdown, want the 3 waiting deliveries parked", n)
	}
	stopped := make(chan struct{})
	go func() { e.stopEngine(); close(stopped) }()
	// While the first replica still drains its held send, the deliveries
	// it parked are back in the stream: another replica sends them now,
	// not once the drain or AckWait is over.
	e.addEngine(t, nil)
	waitFor(t, 15*time.Second, "the parked deliveries to go out through the other replica while the first one drains", func() bool {
		for _, ev := range events[1:] {
			rec, err := e.store.Delivery(context.Background(), admin.DeliveryID(ev, sub))
			if err != nil || rec.Status != proto.DeliverySuccess {
				return false
			}
		}
		return true
	})
	select {
	case <-stopped:
		t.Fatal("the parked deliveries went out only once the first replica had stopped (its drain cut the held send): they must be released at once at shutdown")
	default:
	}
	gate.openGate()
	<-stopped
	if rec := e.final(t, admin.DeliveryID(events[0], sub)); rec.Status != proto.DeliverySuccess || rec.Attempts != 1 {
		t.Fatalf("held send: record = %s; want SUCCESS on its one attempt", rec.Raw)
	}
	e.idle(t)
	seen := map[string]int{}
	for _, ev := range gate.events() {
		seen[ev]++
	}
	for _, ev := range events {
		if seen[ev] != 1 {
			t.Errorf("event %s was sent %d times, want once", ev, seen[ev])
		}
	}
}

func TestBusy_ADeliveryParkedLongerThanItsBoundIsPutOffAndStillDelivered(t *testing.T) {
	t.Parallel()
	e, gate, putOffs, sub := busyEnv(t, 5*time.Second)
	events := backlog(t, e, gate, putOffs, sub, 4)
	// The held send outlasts the park's bound (5 s): the three parked
	// deliveries go the put-off way, their records saying why they wait.
	waitFor(t, 15*time.Second, "the parked deliveries to be put off once their bound passed", func() bool {
		return putOffs.count() == 3
	})
	if st := e.engine.ParkStats(); st.Expired < 3 {
		t.Errorf("park stats = %+v, want the 3 parked deliveries expired", st)
	}
	for _, ev := range events[1:] {
		rec, err := e.store.Delivery(context.Background(), admin.DeliveryID(ev, sub))
		if err != nil || rec.Waiting == nil || *rec.Waiting != "subscription_busy" {
			t.Fatalf("put-off delivery %s: record %v, err %v; want it waiting for subscription_busy", ev, rec, err)
		}
	}
	gate.openGate()
	for _, ev := range events {
		if rec := e.final(t, admin.DeliveryID(ev, sub)); rec.Status != proto.DeliverySuccess || rec.Attempts != 1 {
			t.Fatalf("record = %s; want SUCCESS on its one attempt", rec.Raw)
		}
	}
}

// secondHeld answers every request at once but the second, which it holds
// until open is closed.
type secondHeld struct {
	open   chan struct{}
	opened sync.Once
	mu     sync.Mutex
	n      int
}

func (s *secondHeld) openGate() { s.opened.Do(func() { close(s.open) }) }

func (s *secondHeld) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *secondHeld) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.n++
	second := s.n == 2
	s.mu.Unlock()
	if second {
		select {
		case <-s.open:
		case <-r.Context().Done():
		}
	}
	w.WriteHeader(http.StatusOK)
}

// A subscription that answers fast frees its slots within milliseconds:
// a delivery refused one is put off as before (workers wait for fast
// slots in the first place), not parked: while the replica's budget of
// short waits lasts (here it is never spent), such a delivery takes a
// short wait; only past it is one parked (spillBusy), so a fast receiver's backlog
// is not put behind a wait line. With parking for fast subscriptions, a
// preloaded backlog to a fast receiver went out at half the rate
// (docs/BENCHMARKS.md, fast receiver, one subscription or ten).
func TestBusy_AFastSubscriptionsDeliveriesNeverPark(t *testing.T) {
	t.Parallel()
	ep := &secondHeld{open: make(chan struct{})}
	putOffs := &busyPutOffs{}
	e := newEnv(t, envOptions{handler: ep, timeout: 30 * time.Second, engine: func(c *engine.Config) {
		c.MaxInFlight, c.Workers, c.MinWorkers = 1, 4, 4
		c.Observer = putOffs
	}})
	t.Cleanup(ep.openGate)
	sub, _, _ := e.subscribe(t, "/custom/fast", nil, nil)
	// The first send is answered at once: the subscription is known fast.
	if rec := e.final(t, e.deliver(t, sub, e.event(), nil)); rec.Status != proto.DeliverySuccess {
		t.Fatalf("record = %s; want SUCCESS", rec.Raw)
	}
	// The second is held: the subscription is at its limit (1) for longer
	// than a worker waits for a fast subscription's slot.
	held := e.deliver(t, sub, e.event(), nil)
	waitFor(t, 10*time.Second, "the second send to be held", func() bool { return ep.requests() == 2 })
	third := e.deliver(t, sub, e.event(), nil)
	waitFor(t, 10*time.Second, "the third delivery to wait", func() bool {
		return putOffs.count()+int(e.engine.ParkStats().Parks) > 0
	})
	if st := e.engine.ParkStats(); st.Parks != 0 {
		t.Errorf("parks = %+v, want none for a subscription that answers fast", st)
	}
	ep.openGate()
	for _, id := range []string{held, third} {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("record = %s; want SUCCESS", rec.Raw)
		}
	}
}

// A subscription that answers fast frees a slot within milliseconds: a
// delivery it turns away waits as a delayed nak, with no wake-up stored
// and no record write, for about a send's time (not BusyWaitMin, a written
// put-off's floor), and still goes out on its one attempt. (A slow
// subscription's put-offs past its wait line become wake-ups and are
// written: TestBusy_ABacklogAtItsSubscriptionsLimitWaitsInMemoryAndGoesOutInOrder.)
func TestBusy_AFastSubscriptionsTurnedAwayDeliveriesWaitWithoutAWakeUp(t *testing.T) {
	putOffs := &busyPutOffs{}
	e := newEnv(t, envOptions{engine: func(c *engine.Config) {
		// One send at a time for 8 workers: a subscription answering in
		// 60 ms lets one more wait for its slot (its capacity times
		// FastAnswer, 100 ms, over its send time), and turns the others
		// away for about a send's time each.
		c.MaxInFlight, c.Workers, c.MinWorkers = 1, 8, 8
		// Every such wait is shorter than this: none may become a
		// wake-up for being long.
		c.ParkAfter = time.Minute
		// A turned-away delivery that waited this long would not be
		// final within e.final's 20 s. (So would a written put-off: on a
		// machine too loaded for the 60 ms receiver to answer within
		// 100 ms, the subscription is not freeing slots, and the test
		// fails on time where it failed on the wake-up count before.)
		c.BusyWaitMin = time.Minute
		c.Observer = putOffs
	}})
	sub, _, _ := e.subscribe(t, "/custom/fast-busy", func(int) int { time.Sleep(60 * time.Millisecond); return http.StatusOK }, nil)
	e.final(t, e.deliver(t, sub, e.event(), nil)) // its latency is known now: the subscription is fast
	// Count what is published to the stream from here on, as it is
	// published: work items, and any wake-up or held copy (the bridge's
	// keeper is not about deliveries and is left out).
	var stored []*nats.Subscription
	for _, subj := range []string{e.qc.Subject, e.qc.Subject + ".>"} {
		s, err := e.nc.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Unsubscribe()
		stored = append(stored, s)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// Bursts of 8 until one finds the subscription busy (on an idle
	// machine the first does: 8 arrive within one 60 ms send).
	var ids []string
	for putOffs.count() == 0 {
		if len(ids) >= 80 {
			t.Fatalf("%d deliveries in bursts of 8, none turned away", len(ids))
		}
		for range 8 {
			ids = append(ids, e.deliver(t, sub, e.event(), nil))
		}
		e.final(t, ids[len(ids)-1])
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess || rec.Attempts != 1 {
			t.Fatalf("record = %s; want SUCCESS on its one attempt", rec.Raw)
		}
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var published []string
	for _, s := range stored {
		for {
			m, err := s.NextMsg(0)
			if err != nil {
				break
			}
			if !e.qc.IsKeeper(m.Subject) {
				published = append(published, m.Subject)
			}
		}
	}
	if len(published) != len(ids) || slices.ContainsFunc(published, func(s string) bool { return s != e.qc.Subject }) {
		t.Errorf("the stream was sent %d messages for %d deliveries, %d of them turned away: want only their %d work items (no wake-ups); subjects %v",
			len(published), len(ids), putOffs.count(), len(ids), published)
	}
}
