package adaptive

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func constant(latency time.Duration) Model {
	return func(time.Duration, int) (time.Duration, bool) { return latency, false }
}

// queueing is an endpoint that serves one request at a time: a send waits
// behind every other one running.
func queueing(service time.Duration) Model {
	return func(_ time.Duration, inflight int) (time.Duration, bool) {
		return service * time.Duration(inflight), false
	}
}

func blackHole(timeout time.Duration) Model {
	return func(time.Duration, int) (time.Duration, bool) { return timeout, true }
}

func last(ps []Point) Point { return ps[len(ps)-1] }

func TestPool_AFastEndpointAloneUsesEveryWorker(t *testing.T) {
	series := Simulate(PoolConfig{Workers: 64}, []Model{constant(2 * time.Millisecond)}, 2*time.Second, 100*time.Millisecond)
	if p := last(series[0]); p.Limit != 64 || p.InFlight != 64 {
		t.Fatalf("fast endpoint alone: limit %d, %d sends running; want all 64 workers", p.Limit, p.InFlight)
	}
}

func TestPool_A50msEndpointAloneGetsTheWorkersLittlesLawAsksFor(t *testing.T) {
	series := Simulate(PoolConfig{Workers: 256}, []Model{constant(50 * time.Millisecond)}, 5*time.Second, 100*time.Millisecond)
	if p := last(series[0]); p.InFlight != 256 {
		t.Fatalf("50ms endpoint alone with an endless backlog: %d sends running, want all 256 workers", p.InFlight)
	}
}

func TestPool_MaxBoundsEveryLimit(t *testing.T) {
	series := Simulate(PoolConfig{Workers: 64, Max: 10}, []Model{constant(time.Millisecond)}, time.Second, 100*time.Millisecond)
	if p := last(series[0]); p.Limit != 10 || p.InFlight > 10 {
		t.Fatalf("bounded endpoint: limit %d, %d running; want 10 at most", p.Limit, p.InFlight)
	}
}

func TestPool_AnOverloadedEndpointShrinksTowardOneWhileAHealthyOneGrows(t *testing.T) {
	series := Simulate(PoolConfig{Workers: 64}, []Model{queueing(20 * time.Millisecond), constant(2 * time.Millisecond)}, 10*time.Second, 100*time.Millisecond)
	// AIMD saws: it probes upward until the latency says stop. What
	// matters is where it stays on average, and that it reaches 1.
	sum, lowest := 0, 64
	for _, p := range series[0][len(series[0])/2:] {
		sum += p.Limit
		lowest = min(lowest, p.Limit)
	}
	// 2 is what the tolerance allows: one request waiting doubles the
	// latency of 20 ms to 40 ms = 1.5 × 20 ms + 10 ms.
	if mean := float64(sum) / float64(len(series[0])-len(series[0])/2); mean > 3 || lowest > 2 {
		t.Fatalf("endpoint serving one request at a time: mean limit %.1f, lowest %d over the last 5s; want it at 1 or 2", mean, lowest)
	}
	if p := last(series[1]); p.Limit < 32 {
		t.Fatalf("healthy endpoint beside it: limit %d, want it grown past the old fixed 16", p.Limit)
	}
}

func TestPool_ABlackHoleIsCutToOneAndNeverHoldsTheReserve(t *testing.T) {
	cfg := PoolConfig{Workers: 64}
	series := Simulate(cfg, []Model{blackHole(5 * time.Second), constant(time.Millisecond)}, 30*time.Second, 100*time.Millisecond)
	for _, p := range series[0] {
		if p.InFlight > 64-64/8 {
			t.Fatalf("black hole held %d workers at %v, more than all but the reserve", p.InFlight, p.At)
		}
	}
	if p := last(series[0]); p.Limit != 1 {
		t.Fatalf("black hole: limit %d after 30s of timeouts, want 1", p.Limit)
	}
	if p := last(series[1]); p.InFlight < 32 {
		t.Fatalf("healthy endpoint beside a black hole runs %d sends, want most of the pool", p.InFlight)
	}
}

func TestPool_SlowEndpointsShareThePoolFairly(t *testing.T) {
	series := Simulate(PoolConfig{Workers: 64, Initial: 64}, []Model{constant(2 * time.Second), constant(2 * time.Second)}, 20*time.Second, time.Second)
	a, b := last(series[0]), last(series[1])
	if a.InFlight != b.InFlight || a.InFlight < 16 || a.InFlight+b.InFlight > 56 {
		t.Fatalf("two slow endpoints with endless backlogs run %d and %d sends; want the same share each, a quarter of the pool at least, the reserve kept", a.InFlight, b.InFlight)
	}
}

func TestPool_AFastEndpointAtItsLimitIsWaitedForNotTurnedAway(t *testing.T) {
	// A generous FastAnswer: the wait must end with the release, however
	// loaded the machine is.
	p := NewPool(PoolConfig{Workers: 8, Max: 1, FastAnswer: time.Minute})
	ctx := context.Background()
	if ok, _ := p.Acquire(ctx, "a"); !ok {
		t.Fatal("first send refused")
	}
	p.Release("a", time.Millisecond, Healthy) // now known to be fast
	if ok, _ := p.Acquire(ctx, "a"); !ok {
		t.Fatal("second send refused")
	}
	got := make(chan bool)
	go func() {
		ok, _ := p.Acquire(ctx, "a")
		got <- ok
	}()
	// Waiting counts it (the engine's pool sizing counts it out of the
	// busy workers: it is not short of work).
	for deadline := time.Now().Add(time.Minute); p.Waiting() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the third send neither waited nor returned")
		}
	}
	p.Release("a", time.Millisecond, Healthy)
	if !<-got {
		t.Fatal("a fast endpoint at its limit was turned away instead of waited for")
	}
	if n := p.Waiting(); n != 0 {
		t.Errorf("Waiting = %d after the wait ended, want 0", n)
	}
}

func TestPool_TurnedAwayDeliveriesComeBackSpreadOverTheEndpointsPace(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewPool(PoolConfig{Workers: 8, Max: 2, Now: func() time.Time { return now }})
	ctx := context.Background()
	if ok, _ := p.Acquire(ctx, "slow"); !ok {
		t.Fatal("first send refused")
	}
	p.Release("slow", time.Second, Healthy) // a send takes a second
	for range 2 {
		if ok, _ := p.Acquire(ctx, "slow"); !ok {
			t.Fatal("send under the limit refused")
		}
	}
	var backs []time.Time
	for range 5 {
		ok, back := p.Acquire(ctx, "slow")
		if ok {
			t.Fatal("send over the limit admitted")
		}
		backs = append(backs, back)
	}
	want := []time.Duration{1000, 1500, 2000, 2500, 3000}
	for i, b := range backs {
		if got := b.Sub(now); got != want[i]*time.Millisecond {
			t.Fatalf("turned-away delivery %d comes back after %v, want %v (one send time, then half of it apart)", i, got, want[i]*time.Millisecond)
		}
	}
}

func TestPool_ForgetsIdleEndpointsAndListsTheBusiest(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewPool(PoolConfig{Workers: 64, Idle: time.Minute, Now: func() time.Time { return now }})
	ctx := context.Background()
	for i := range 20 {
		id := fmt.Sprintf("sub_%02d", i)
		for range i % 5 {
			p.Acquire(ctx, id)
		}
		if i%5 == 0 {
			p.Acquire(ctx, id)
			p.Release(id, time.Millisecond, Healthy)
		}
	}
	top := p.Busiest(3, time.Second)
	if len(top) != 3 || top[0].InFlight != 4 || top[0].ID != "sub_04" || top[2].InFlight != 4 {
		t.Fatalf("busiest 3 = %+v, want three endpoints with 4 sends running, sub_04 first", top)
	}
	now = now.Add(2 * time.Minute)
	p.Acquire(ctx, "sub_new") // sweeps
	if got := len(p.Busiest(100, time.Hour)); got != 17 {
		t.Fatalf("after two idle minutes the pool lists %d endpoints, want 17 (16 with sends running, the new one; the idle ones forgotten)", got)
	}
}

func TestPool_BeforeTheFirstAnswerTurnedAwayDeliveriesAreSpacedByTheOldestSendsAge(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewPool(PoolConfig{Workers: 8, Max: 2, Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // turned away at once instead of waiting (real time does not pass here)
	for range 2 {
		if ok, _ := p.Acquire(ctx, "new"); !ok {
			t.Fatal("send under the limit refused")
		}
	}
	now = now.Add(3 * time.Second) // no answer yet after 3s: a send takes at least that
	_, first := p.Acquire(ctx, "new")
	_, second := p.Acquire(ctx, "new")
	if got := first.Sub(now); got != 3*time.Second {
		t.Errorf("first turned-away delivery comes back after %v, want 3s (the running send's age)", got)
	}
	if got := second.Sub(first); got != 1500*time.Millisecond {
		t.Errorf("the next one %v later, want 1.5s (that age divided by the limit)", got)
	}
}

func TestPool_ASlowEndpointHoldsItsShareBesideOthersAndAllButTheReserveAlone(t *testing.T) {
	cfg := PoolConfig{Workers: 64}
	cases := []struct {
		fast, most int
	}{
		{1, 16}, // a quarter of the pool, though half of 56 is more
		{5, 16},
	}
	for _, c := range cases {
		models := []Model{constant(2 * time.Second)}
		for range c.fast {
			models = append(models, constant(time.Millisecond))
		}
		beside := Simulate(cfg, models, 30*time.Second, time.Second)
		for _, p := range beside[0] {
			if p.InFlight > c.most {
				t.Fatalf("slow endpoint beside %d busy fast ones ran %d sends at %v, want %d at most", c.fast, p.InFlight, p.At, c.most)
			}
		}
	}
	alone := Simulate(cfg, []Model{constant(2 * time.Second)}, 30*time.Second, time.Second)
	if p := last(alone[0]); p.InFlight != 64-64/8 {
		t.Fatalf("slow endpoint alone runs %d sends, want all but the reserve (56)", p.InFlight)
	}
}

func TestPool_RoomIsWhatAnEndpointMayStillStartAndItsAcquireAgrees(t *testing.T) {
	p := NewPool(PoolConfig{Workers: 8, Initial: 2, Max: 2})
	if room, limit := p.Room("new"); room != 2 || limit != 2 {
		t.Fatalf("an endpoint never asked for: room %d, limit %d; want its initial limit, 2 and 2", room, limit)
	}
	for i := range 2 {
		if ok, _ := p.Acquire(context.Background(), "a"); !ok {
			t.Fatalf("acquire %d refused under the limit", i+1)
		}
	}
	if room, _ := p.Room("a"); room != 0 {
		t.Fatalf("at its limit: room %d, want 0", room)
	}
	p.Release("a", time.Second, Healthy)
	if room, _ := p.Room("a"); room != 1 {
		t.Fatalf("one send ended: room %d, want 1", room)
	}
	if ok, _ := p.Acquire(context.Background(), "a"); !ok {
		t.Fatal("Room said 1 but Acquire refused")
	}
}

func TestPool_ADeliveryTurnedAwayBehindOthersComesBackAfterThemLikeARefusedOne(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewPool(PoolConfig{Workers: 8, Initial: 1, Max: 1, Now: func() time.Time { return now }})
	if ok, _ := p.Acquire(context.Background(), "a"); !ok {
		t.Fatal("first acquire refused")
	}
	now = now.Add(time.Second)
	p.Release("a", time.Second, Healthy) // one answer: a 1 s endpoint
	if ok, _ := p.Acquire(context.Background(), "a"); !ok {
		t.Fatal("acquire after the release refused")
	}
	_, refused := p.Acquire(context.Background(), "a")
	behind := p.TurnAway("a")
	if !behind.After(refused) || behind.Sub(refused) > 2*time.Second {
		t.Fatalf("refused at the limit: back at %s; turned away behind it: back at %s; want later, by about one send time", refused, behind)
	}
}

// Freeing is Fast with an answer within the last FastAnswer: an endpoint
// that answered fast and then stopped answering keeps its fast latency
// until its sends time out, but no slot of it is about to free. An
// overloaded answer (Dropped) is not an answer here.
func TestPool_FreeingNeedsAFastAnswerWithinFastAnswer(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p := NewPool(PoolConfig{Workers: 8, FastAnswer: 100 * time.Millisecond, Now: func() time.Time { return now }})
	ctx := context.Background()
	if p.Freeing("a") {
		t.Fatal("an endpoint never sent to is freeing slots")
	}
	if ok, _ := p.Acquire(ctx, "a"); !ok {
		t.Fatal("first send refused")
	}
	p.Release("a", 5*time.Millisecond, Healthy)
	if !p.Fast("a") || !p.Freeing("a") {
		t.Fatalf("right after a 5 ms answer: Fast %v, Freeing %v; want both", p.Fast("a"), p.Freeing("a"))
	}
	now = now.Add(150 * time.Millisecond)
	if p.Freeing("a") {
		t.Error("idle for 150 ms: freeing slots")
	}
	if ok, _ := p.Acquire(ctx, "a"); !ok {
		t.Fatal("send refused")
	}
	if !p.Freeing("a") {
		t.Error("a send just begun: not freeing (too soon to tell)")
	}
	now = now.Add(150 * time.Millisecond) // that send hangs
	if !p.Fast("a") || p.Freeing("a") {
		t.Errorf("a send running 150 ms, no answer: Fast %v, Freeing %v; want fast but not freeing", p.Fast("a"), p.Freeing("a"))
	}
	p.Release("a", 5*time.Millisecond, Dropped)
	if p.Freeing("a") {
		t.Error("an overloaded answer counted as a slot freeing")
	}
}

func TestPool_DemandIsWhatEndpointsRunOrWereRefusedNotTheirLimits(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewPool(PoolConfig{Workers: 512, Initial: 16, Max: 16, Now: func() time.Time { return now }})
	ctx := context.Background()
	// A hundred ordered lines: one send each at a time, limit 16.
	for i := range 100 {
		if ok, _ := p.Acquire(ctx, fmt.Sprintf("line_%03d", i)); !ok {
			t.Fatalf("line %d got no slot", i)
		}
	}
	if want, _ := p.Demand(time.Second); want != 100 {
		t.Fatalf("100 lines running one send each at limit 16 want %d sends, want 100 (one each, not 1,600)", want)
	}
	// A fast subscription takes its whole limit and is turned away once
	// more (a cancelled context: no wait for a slot).
	for range 16 {
		if ok, _ := p.Acquire(ctx, "fast"); !ok {
			t.Fatal("fast got no slot within its limit of 16")
		}
	}
	refused, cancel := context.WithCancel(ctx)
	cancel()
	if ok, _ := p.Acquire(refused, "fast"); ok {
		t.Fatal("fast got a 17th slot above its limit of 16")
	}
	if want, _ := p.Demand(time.Second); want != 116 {
		t.Fatalf("beside the lines, an endpoint turned away at its limit of 16: want %d, want 116", want)
	}
	for range 16 {
		p.Release("fast", time.Millisecond, Healthy)
	}
	// A window later, turned away no more and running two sends, it
	// wants two: the first call of the new window still reports the old
	// one's 16, the next one two.
	now = now.Add(1100 * time.Millisecond)
	p.Acquire(ctx, "fast")
	p.Acquire(ctx, "fast")
	if want, _ := p.Demand(time.Second); want != 116 {
		t.Fatalf("at the old window's end: want %d, want 116 (its 16 of that window)", want)
	}
	now = now.Add(100 * time.Millisecond)
	if want, _ := p.Demand(time.Second); want != 102 {
		t.Fatalf("in a new window with two sends running and none refused: want %d, want 102", want)
	}
}
