package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestFetched_AFetchWaitsForHalfTheBufferAndTakesAllTheRoomThereIs(t *testing.T) {
	f := newFetched(4)
	if n := f.reserve(t.Context()); n != 4 {
		t.Fatalf("an empty buffer reserved %d places, want all 4", n)
	}
	got := make(chan int, 1)
	go func() { got <- f.reserve(t.Context()) }()
	f.unreserve(1)
	select {
	case n := <-got:
		t.Fatalf("reserved %d place(s) with only a quarter of the buffer free; a fetch must wait for half", n)
	case <-time.After(50 * time.Millisecond):
	}
	f.unreserve(1)
	if n := <-got; n != 2 {
		t.Fatalf("reserved %d places, want the 2 free ones", n)
	}

	ctx, cancel := context.WithCancel(t.Context())
	f.unreserve(1)
	go func() { got <- f.reserve(ctx) }()
	cancel()
	if n := <-got; n != 0 {
		t.Fatalf("a cancelled reservation got %d places", n)
	}
	if free := f.free(); free != 1 {
		t.Fatalf("%d places free after a cancelled reservation, want the 1 it had taken back", free)
	}
}

func TestFetched_AReservationOnAStoppedConsumerGetsNothingEvenWithRoom(t *testing.T) {
	// The fetch loop stops when reserve returns 0: a reservation that
	// took the free room after its context ended would fetch again and
	// again, never stopping the engine.
	f := newFetched(4)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if n := f.reserve(ctx); n != 0 {
		t.Fatalf("a stopped consumer reserved %d places", n)
	}
	if free := f.free(); free != 4 {
		t.Fatalf("%d places free after a refused reservation, want all 4", free)
	}
}

func TestFetched_TheBufferFollowsTheLiveSize(t *testing.T) {
	var size atomic.Int64
	size.Store(2)
	f := newSizedFetched(8, func() int { return int(size.Load()) })
	if n := f.reserve(t.Context()); n != 2 {
		t.Fatalf("a buffer of live size 2 reserved %d places", n)
	}
	got := make(chan int, 1)
	go func() { got <- f.reserve(t.Context()) }()
	size.Store(8) // the pool grew
	f.roomChanged()
	if n := <-got; n != 6 {
		t.Fatalf("after growing to 8 the buffer reserved %d more places, want 6", n)
	}
}
