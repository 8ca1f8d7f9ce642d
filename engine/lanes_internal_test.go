package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// namedMsg is a work item the lanes carry, told apart by name.
type namedMsg struct {
	jetstream.Msg
	name string
}

func fill(t *testing.T, l *lanes, back bool, names ...string) {
	t.Helper()
	for _, n := range names {
		if !l.put(context.Background(), queued{m: namedMsg{name: n}, withdraw: func() {}}, back) {
			t.Fatalf("put %s: refused", n)
		}
	}
}

func take(t *testing.T, l *lanes, turn int) string {
	t.Helper()
	q, ok := l.next(turn)
	if !ok {
		t.Fatalf("turn %d: lanes closed", turn)
	}
	return q.m.(namedMsg).name
}

func TestLanes_NewWorkGoesFirstYetWorkThatComesBackKeepsAShare(t *testing.T) {
	l := newLanes(8)
	fill(t, l, true, "w1", "w2", "w3", "w4") // a burst of wake-ups, buffered first
	fill(t, l, false, "n1", "n2", "n3", "n4", "n5", "n6")

	var got []string
	for turn := 1; turn <= 10; turn++ {
		got = append(got, take(t, l, turn))
	}
	want := "[n1 n2 n3 w1 n4 n5 n6 w2 w3 w4]" // every 4th pick prefers the back lane
	if fmt.Sprint(got) != want {
		t.Errorf("order = %v, want %s", got, want)
	}
}

func TestLanes_AWorkerWaitsForEitherLaneAndStopsOnceBothAreClosedAndEmpty(t *testing.T) {
	l := newLanes(1)
	got := make(chan string)
	go func() {
		for turn := 1; ; turn++ {
			q, ok := l.next(turn)
			if !ok {
				close(got)
				return
			}
			got <- q.m.(namedMsg).name
		}
	}()
	fill(t, l, true, "w1")
	if n := <-got; n != "w1" {
		t.Fatalf("got %s, want the back lane's only item", n)
	}
	fill(t, l, false, "n1")
	fill(t, l, true, "w2")
	l.close() // what is buffered is still handed out
	var rest []string
	for n := range got {
		rest = append(rest, n)
	}
	if len(rest) != 2 {
		t.Errorf("after close the worker got %v, want n1 and w2", rest)
	}
}

func TestLanes_AFullLaneHoldsTheConsumerUntilItsContextEnds(t *testing.T) {
	l := newLanes(1)
	fill(t, l, false, "n1") // the new lane holds one item per worker
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the consumer is stopping
	if l.put(ctx, queued{m: namedMsg{name: "n2"}, withdraw: func() {}}, false) {
		t.Fatal("put into a full lane returned before a worker took anything")
	}
	fill(t, l, true, "w1") // the other lane still takes work
	if n := take(t, l, 1); n != "n1" {
		t.Errorf("got %s, want n1", n)
	}
}
