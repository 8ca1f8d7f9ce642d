package groupcommit

import (
	"context"
	"errors"
	"sync"
)

// Committer batches the items of concurrent Do calls. The first caller
// with an item to write writes it at once, alone: a lone item waits for
// nothing. Items arriving while a batch is written queue, and the oldest of
// their callers writes the next batch (up to Max of them) when that one is
// done, and so on. A caller writes at most the one batch that holds its own
// item and hands the next to the oldest caller still queued, so no caller
// returns later than its own batch's write, however long items keep coming
// (a writer that wrote until the queue ran dry could hold its own caller
// for as long as the stream lasted).
//
// Write is called for one batch at a time, never concurrently, and records
// each item's result in the item itself (T is usually a pointer): Do
// returns once the batch holding its item is written. A write that panics
// does not wedge the Committer: the other callers of its batch get
// ErrWritePanicked (their items' results were never recorded), the next
// batch is handed on, and the panic goes on in the writing caller. The zero
// Committer is not usable; make one with New. All methods are safe for
// concurrent use.
type Committer[T any] struct {
	max   int
	write func(ctx context.Context, batch []T)

	mu      sync.Mutex
	queued  []*waiter[T]
	writing bool

	// BeforeWrite, when set (tests), runs before each batch is written,
	// given its size, in the writing caller's goroutine.
	BeforeWrite func(n int)
}

type waiter[T any] struct {
	item T
	err  error // set when the batch's write panicked
	// signal wakes a queued caller once: its item is written, or, lead
	// set, it is to write the next batch.
	signal chan struct{}
	lead   bool
}

// New returns a Committer that writes batches of at most most items (at
// least 1) with write. write is given the writing caller's ctx without its
// cancellation: a batch holds other callers' items, which one caller's end
// must not fail; write bounds its own time.
func New[T any](most int, write func(ctx context.Context, batch []T)) *Committer[T] {
	return &Committer[T]{max: max(1, most), write: write}
}

// ErrWritePanicked is Do's error when the write of the caller's batch
// panicked in another caller (or ended its goroutine): the item's result
// was never recorded. The writing caller's own panic says what happened.
var ErrWritePanicked = errors.New("groupcommit: the write of this batch panicked in another caller")

// Do writes item in a batch with whatever other items are queued and
// returns when that batch is written: nil, the item's result being in the
// item, or ErrWritePanicked when another caller's write of the batch
// panicked. When the write panics in this caller, the panic goes on.
func (c *Committer[T]) Do(ctx context.Context, item T) error {
	w := &waiter[T]{item: item, signal: make(chan struct{}, 1)}
	c.mu.Lock()
	c.queued = append(c.queued, w)
	if c.writing {
		c.mu.Unlock()
		<-w.signal
		if !w.lead {
			return w.err
		}
		c.mu.Lock()
	} else {
		c.writing = true
	}
	// w leads and is the oldest queued: the batch holds it.
	n := min(len(c.queued), c.max)
	batch := c.queued[:n:n]
	c.queued = c.queued[n:]
	c.mu.Unlock()
	items := make([]T, n)
	for i, b := range batch {
		items[i] = b.item
	}
	written := false
	defer func() {
		if !written {
			// The write panicked (or called runtime.Goexit): the batch's
			// other callers learn it, the next batch gets its writer, and
			// the panic goes on, unrecovered, with its own stack.
			for _, b := range batch[1:] {
				b.err = ErrWritePanicked
			}
			c.handOff(batch)
		}
	}()
	if c.BeforeWrite != nil {
		c.BeforeWrite(n)
	}
	c.write(context.WithoutCancel(ctx), items)
	written = true
	c.handOff(batch)
	return nil
}

// handOff makes the oldest queued caller the next batch's writer, or
// marks the Committer idle, and wakes the callers of batch (but its
// writer, batch[0]).
func (c *Committer[T]) handOff(batch []*waiter[T]) {
	c.mu.Lock()
	if len(c.queued) > 0 {
		next := c.queued[0]
		next.lead = true
		next.signal <- struct{}{}
	} else {
		c.queued = nil
		c.writing = false
	}
	c.mu.Unlock()
	for _, b := range batch[1:] {
		b.signal <- struct{}{}
	}
}

// Waiting is how many items are queued behind the batch being written.
func (c *Committer[T]) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queued)
}
