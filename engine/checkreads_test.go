package engine

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The holds that ask for a subscription's pending held-check while a read
// of it is in flight never take that read's answer (it may predate their
// held copies): they share the next read, which begins after all of them
// asked. The interleaving is forced: the first read is held until the
// others have asked.
func TestCheckReads_HoldsAskingDuringAReadShareTheNextOneAndNeverTakeAnEarlierAnswer(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	reads := 0
	release := make(chan struct{})
	started := make(chan int, 10)
	c := newCheckReads(func(_ context.Context, sub string) (*jetstream.RawStreamMsg, bool) {
		mu.Lock()
		reads++
		n := reads
		mu.Unlock()
		started <- n
		if n == 1 {
			<-release
		}
		return &jetstream.RawStreamMsg{Sequence: uint64(n)}, true
	}, slog.New(slog.DiscardHandler))

	first := make(chan uint64, 1)
	go func() {
		m, _ := c.get(ctx, "sub")
		first <- m.Sequence
	}()
	if n := <-started; n != 1 {
		t.Fatalf("read %d started first", n)
	}
	// Five holds ask while read 1 is in flight.
	const later = 5
	var wg sync.WaitGroup
	answers := make(chan uint64, later)
	for range later {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, ok := c.get(ctx, "sub")
			if !ok {
				t.Error("a hold got no answer")
				return
			}
			answers <- m.Sequence
		}()
	}
	awaitJoined(t, c, "sub", later)
	close(release)
	if got := <-first; got != 1 {
		t.Errorf("the first hold got read %d, want 1", got)
	}
	wg.Wait()
	close(answers)
	for got := range answers {
		if got != 2 {
			t.Errorf("a hold that asked during read 1 got read %d, want 2 (the one after it asked)", got)
		}
	}
	if reads != 2 {
		t.Errorf("%d reads for 6 holds, want 2", reads)
	}
	c.mu.Lock()
	left := len(c.lines)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("%d subscriptions' read lines left after every read ended, want none", left)
	}
}

// awaitJoined waits until n holds wait for sub's next read.
func awaitJoined(t *testing.T, c *checkReads, sub string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		l := c.lines[sub]
		joined := l != nil && l.next != nil && l.next.joined >= n
		c.mu.Unlock()
		if joined {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%d holds did not all join the next read within 10 s", n)
}

// The budget of short busy waits: at most most per window, renewed when a
// window has passed.
func TestShortNaks_AtMostMostPerWindow(t *testing.T) {
	b := &shortNaks{window: time.Second, most: 3}
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		if !b.take(t0.Add(time.Duration(i) * time.Millisecond)) {
			t.Fatalf("wait %d refused within the budget", i+1)
		}
	}
	if b.take(t0.Add(999 * time.Millisecond)) {
		t.Error("a fourth wait within the window was allowed")
	}
	if !b.take(t0.Add(time.Second)) {
		t.Error("a wait in the next window was refused")
	}
}

// The shared read runs in a goroutine of its own, out of any worker's
// recover: a panic in it (in the NATS client, say) is the read's "could
// not be read", logged, on which the holds publish a check of their own.
// The process goes on, and the subscription's next read is made afresh.
func TestCheckReads_AReadThatPanicsAnswersUnreadAndTheNextReadWorks(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	var mu sync.Mutex
	reads := 0
	c := newCheckReads(func(context.Context, string) (*jetstream.RawStreamMsg, bool) {
		mu.Lock()
		reads++
		n := reads
		mu.Unlock()
		if n == 1 {
			panic("message get blew up")
		}
		return &jetstream.RawStreamMsg{Sequence: 7}, true
	}, slog.New(slog.NewTextHandler(&logs, nil)))

	if m, ok := c.get(ctx, "sub"); ok || m != nil {
		t.Fatalf("a read that panicked answered %v, %v; want none", m, ok)
	}
	if !strings.Contains(logs.String(), "reading a held-check panicked") || !strings.Contains(logs.String(), "message get blew up") {
		t.Errorf("the panic was not logged:\n%s", logs.String())
	}
	if m, ok := c.get(ctx, "sub"); !ok || m.Sequence != 7 {
		t.Fatalf("the read after the panic answered %v, %v; want message 7", m, ok)
	}
}
