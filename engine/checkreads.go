package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Holding a backlog for an open breaker reads the subscription's pending
// held-check once per held delivery (ensureBreakerCheck): a stream message
// get, about half of what a hold cost in the breaker's backlog bench. The
// read must begin after the delivery's held copy is stored, or the check
// may fire in between without seeing it and be put off past the
// delivery's release-by; so it cannot be cached. It can be shared: the
// holds of one subscription that ask while a read of its check is in
// flight all wait for the next one, which begins after every one of them
// asked, and one read answers them all. Under a backlog that is one read
// per read's round trip instead of one per delivery; a lone hold reads at
// once, as before.

// checkReadTimeout bounds one shared read: the holds waiting for it are
// not this read's own, so it does not end with the context of the hold
// that happened to start it.
const checkReadTimeout = 5 * time.Second

// checkReads are the shared reads of the subscriptions' pending
// held-checks.
type checkReads struct {
	read func(ctx context.Context, sub string) (*jetstream.RawStreamMsg, bool)
	log  *slog.Logger

	mu    sync.Mutex
	lines map[string]*checkReadLine
}

// checkReadLine is one subscription's reads: whether one is in flight,
// and the next, which the holds asking meanwhile join.
type checkReadLine struct {
	running bool
	next    *checkRead
}

// checkRead is one read and, once done is closed, its answer.
type checkRead struct {
	done   chan struct{}
	joined int // holds waiting for it
	msg    *jetstream.RawStreamMsg
	ok     bool
}

func newCheckReads(read func(context.Context, string) (*jetstream.RawStreamMsg, bool), log *slog.Logger) *checkReads {
	return &checkReads{read: read, log: log, lines: map[string]*checkReadLine{}}
}

// get returns sub's pending held-check as a read that began after get was
// called shows it (ok false: none, or it could not be read).
func (c *checkReads) get(ctx context.Context, sub string) (*jetstream.RawStreamMsg, bool) {
	c.mu.Lock()
	l := c.lines[sub]
	if l == nil {
		l = &checkReadLine{}
		c.lines[sub] = l
	}
	r := l.next
	if r == nil {
		r = &checkRead{done: make(chan struct{})}
		l.next = r
	}
	r.joined++
	start := !l.running
	if start {
		l.running, l.next = true, nil
	}
	c.mu.Unlock()
	if start {
		go c.run(ctx, sub, r)
	}
	select {
	case <-r.done:
		return r.msg, r.ok
	case <-ctx.Done():
		return nil, false
	}
}

// run makes read r and then, while holds joined the next one, that one.
func (c *checkReads) run(ctx context.Context, sub string, r *checkRead) {
	ctx = context.WithoutCancel(ctx)
	for r != nil {
		r.msg, r.ok = c.readOnce(ctx, sub)
		// The line is settled before the answer is out: a hold that got
		// it and asks again finds the next read or none, never this one.
		c.mu.Lock()
		l := c.lines[sub]
		next := l.next
		l.next = nil
		if next == nil {
			delete(c.lines, sub)
		}
		c.mu.Unlock()
		close(r.done)
		r = next
	}
}

// readOnce is one read, bounded by checkReadTimeout. It runs in a
// goroutine of its own, where no worker's recover (safeProcess) reaches:
// a panic in it would end the process, so it is the read's answer
// instead, "could not be read", on which a hold publishes a check of its
// own, the safe side.
func (c *checkReads) readOnce(ctx context.Context, sub string) (msg *jetstream.RawStreamMsg, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("reading a held-check panicked; the holds waiting for it schedule one of their own", "subscription_id", sub, "panic", fmt.Sprint(r))
			msg, ok = nil, false
		}
	}()
	rctx, cancel := context.WithTimeout(ctx, checkReadTimeout)
	defer cancel()
	return c.read(rctx, sub)
}
