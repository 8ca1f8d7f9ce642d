package engine

import (
	"context"
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
