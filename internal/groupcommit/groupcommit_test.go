package groupcommit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/groupcommit"
)

type item struct {
	id      int
	written int // how many times a batch held it
	batch   int // which batch (1-based)
}

// recorder is a write func that counts batches and checks they never
// overlap.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	active  atomic.Int32
	t       *testing.T
	during  func(batch int, items []*item) // runs inside the write, after the checks
}

func (r *recorder) write(_ context.Context, batch []*item) {
	if r.active.Add(1) != 1 {
		r.t.Error("two batches were written at once")
	}
	r.mu.Lock()
	r.batches = append(r.batches, nil)
	n := len(r.batches)
	for _, it := range batch {
		it.written++
		it.batch = n
		r.batches[n-1] = append(r.batches[n-1], it.id)
	}
	r.mu.Unlock()
	if r.during != nil {
		r.during(n, batch)
	}
	r.active.Add(-1)
}

func TestCommitter_ALoneItemIsWrittenAtOnceAlone(t *testing.T) {
	r := &recorder{t: t}
	c := groupcommit.New(8, r.write)
	it := &item{id: 1}
	if err := c.Do(context.Background(), it); err != nil {
		t.Fatal(err)
	}
	if it.written != 1 || len(r.batches) != 1 || len(r.batches[0]) != 1 {
		t.Fatalf("a lone item: written %d times, batches %v; want once, alone", it.written, r.batches)
	}
}

// The first write is held until five more callers are queued: they are
// written together in the next batch, in at most max-sized batches, and
// the first caller returns as soon as its own batch is written, while the
// next is still being written by the oldest of the queued callers.
func TestCommitter_ItemsQueuedDuringAWriteShareTheNextAndTheFirstCallerDoesNotWriteThem(t *testing.T) {
	const queued = 5
	r := &recorder{t: t}
	c := groupcommit.New(4, r.write)
	firstReturned := make(chan struct{})
	release := make(chan struct{})
	r.during = func(batch int, _ []*item) {
		switch batch {
		case 1:
			<-release
		case 2:
			// The first caller must be free before this batch ends: it
			// wrote its own batch only.
			select {
			case <-firstReturned:
			case <-time.After(10 * time.Second):
				t.Error("the first caller is still held while the next batch is written: it writes others' batches")
			}
		}
	}
	first := &item{id: 0}
	go func() {
		if err := c.Do(context.Background(), first); err != nil {
			t.Error(err)
		}
		close(firstReturned)
	}()
	// Wait for the first write to be under way: the next caller queues.
	var wg sync.WaitGroup
	items := make([]*item, queued)
	waitFor(t, func() bool { return r.active.Load() == 1 })
	for i := range items {
		items[i] = &item{id: i + 1}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Do(context.Background(), items[i]); err != nil {
				t.Error(err)
			}
		}()
		waitFor(t, func() bool { return c.Waiting() == i+1 })
	}
	close(release)
	wg.Wait()
	<-firstReturned
	sizes := make([]int, len(r.batches))
	for i, b := range r.batches {
		sizes[i] = len(b)
	}
	if len(sizes) != 3 || sizes[0] != 1 || sizes[1] != 4 || sizes[2] != 1 {
		t.Fatalf("batch sizes %v, want [1 4 1]: the first alone, then the five queued in batches of at most 4", sizes)
	}
	for _, it := range append(items, first) {
		if it.written != 1 {
			t.Errorf("item %d written %d times, want once", it.id, it.written)
		}
	}
	// The oldest queued leads the next batch: arrival order is kept.
	if r.batches[1][0] != 1 || r.batches[2][0] != 5 {
		t.Errorf("batches %v: want the queued items in arrival order", r.batches)
	}
}

func TestCommitter_AWriteDoesNotSeeItsCallersCancellation(t *testing.T) {
	var sawErr error
	c := groupcommit.New(8, func(ctx context.Context, _ []*item) { sawErr = ctx.Err() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Do(ctx, &item{}); err != nil {
		t.Fatal(err)
	}
	if sawErr != nil {
		t.Fatalf("the batch was written under a cancelled context (%v): other callers' items would fail with it", sawErr)
	}
}

func TestCommitter_ManyCallersEachItemWrittenOnceInBoundedBatches(t *testing.T) {
	const callers, each, most = 16, 200, 8
	r := &recorder{t: t}
	c := groupcommit.New(most, r.write)
	var wg sync.WaitGroup
	items := make([][]*item, callers)
	for g := range callers {
		items[g] = make([]*item, each)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				it := &item{id: g*each + i}
				items[g][i] = it
				if err := c.Do(context.Background(), it); err != nil || it.written != 1 {
					t.Errorf("Do returned %v for item %d written %d times", err, it.id, it.written)
					return
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, b := range r.batches {
		if len(b) > most {
			t.Fatalf("a batch of %d, want at most %d", len(b), most)
		}
		total += len(b)
	}
	if total != callers*each {
		t.Fatalf("%d items written, want %d", total, callers*each)
	}
	if c.Waiting() != 0 {
		t.Fatalf("%d items still queued after every caller returned", c.Waiting())
	}
}

// A write that panics fails the other items of its batch with
// ErrWritePanicked (their results were never recorded, so a caller must
// not take them as written), panics on in its own caller, and leaves the
// Committer working: the batch queued behind it is written by its oldest
// caller, and later items as before.
func TestCommitter_AWriteThatPanicsFailsItsBatchAndDoesNotWedgeTheNext(t *testing.T) {
	r := &recorder{t: t}
	c := groupcommit.New(2, r.write)
	release := make(chan struct{})
	r.during = func(batch int, _ []*item) {
		switch batch {
		case 1:
			<-release
		case 2:
			r.active.Add(-1) // the recorder's own count: this write ends here
			panic("boom")
		}
	}
	firstDone := make(chan struct{})
	go func() { defer close(firstDone); _ = c.Do(context.Background(), &item{id: 0}) }()
	waitFor(t, func() bool { return r.active.Load() == 1 })
	// Items 1 and 2 form the batch that panics (1 writes it); 3 is queued
	// behind them and writes the batch after.
	errs := make([]error, 4)
	panicked := make(chan any, 1)
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if v := recover(); v != nil {
					panicked <- v
				}
			}()
			errs[i] = c.Do(context.Background(), &item{id: i})
		}()
		waitFor(t, func() bool { return c.Waiting() == i })
	}
	close(release)
	wg.Wait()
	<-firstDone
	select {
	case v := <-panicked:
		if v != "boom" {
			t.Fatalf("the writer panicked with %v, want the write's own panic", v)
		}
	default:
		t.Fatal("the write's panic did not go on in its caller")
	}
	if !errors.Is(errs[2], groupcommit.ErrWritePanicked) {
		t.Errorf("the other item of the batch that panicked: %v, want ErrWritePanicked", errs[2])
	}
	if errs[3] != nil {
		t.Errorf("the item queued behind the panic: %v, want it written", errs[3])
	}
	if err := c.Do(context.Background(), &item{id: 4}); err != nil || c.Waiting() != 0 {
		t.Fatalf("after the panic: %v, %d queued; want the Committer working", err, c.Waiting())
	}
	if got := len(r.batches); got != 4 {
		t.Fatalf("%d batches, want 4: the first, the one that panicked, the one behind it, the last", got)
	}
}

// waitFor polls cond, which another goroutine makes true, failing the test
// if it never does.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
