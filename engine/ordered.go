package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/proto"
)

// Ordered lines (DESIGN decision 17, docs/ordering.md, queue/ordered.go).
// The bridge publishes an ordered subscription's work items on its own
// subject; every replica that sees items there pulls that subscription's
// line consumer (MaxAckPending 1, pinned-client priority group), so one
// replica at a time holds the line's one item in flight, and the next item
// is handed out only once that one is acked, naked or terminated. The item
// goes through the same lanes and workers as any other; only its waits
// differ (waitInLine, holdInLine, settleInLine):
//
//   - strict: every wait (a retry's backoff, Retry-After, an open breaker, a
//     busy subscription, a paused one, an infrastructure error) is a
//     delayed nak on the line consumer, so the line does not move until the
//     delivery is SUCCESS or FAILED (or stale).
//   - first-attempt: the same until the delivery's first send; once that
//     send failed, its retry leaves the line as a wake-up into the shared
//     work subject (the normal, unordered way) and the line moves on.
//   - none (the subscription was switched off while items were queued on
//     its line): what is left on the line is sent one at a time, and every
//     wait leaves it.
//
// A line costs nothing while it is idle: lines are found by a stream info
// with a subject filter once a second (one entry per ordered subscription
// with queued work), and a replica stops pulling a line that stayed empty
// for lineLinger; the server deletes its consumer after queue.OrderedIdle.

const (
	// lineScan is how often a replica looks for lines with work.
	lineScan = time.Second
	// lineLinger is how long a replica keeps pulling an empty line.
	lineLinger = 30 * time.Second
)

// line is one ordered subscription's line at this replica.
type line struct {
	sub   string
	mode  atomic.Value // proto.Ordering, refreshed every lineScan
	empty time.Time    // since when the scan found it empty; zero while it has work
	stop  context.CancelFunc
}

func (l *line) ordering() proto.Ordering {
	m, _ := l.mode.Load().(proto.Ordering)
	return m
}

// keeps reports whether a wait of the delivery d stays in the line (a
// delayed nak on the line consumer) rather than leaving it. d is nil when
// its record could not be read: the line waits, which is the side of order.
func (l *line) keeps(d *proto.Delivery, afterSend bool) bool {
	switch l.ordering() {
	case proto.OrderingStrict:
		return true
	case proto.OrderingFirstAttempt:
		return !afterSend && (d == nil || d.Attempts == 0)
	}
	return false
}

// runLines finds and pulls this replica's ordered lines until ctx is done,
// handing their items to work. It returns once no line can put anything
// more into work.
func (e *Engine) runLines(ctx context.Context, work *lanes) {
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[string]*line{}
	t := time.NewTicker(lineScan)
	defer t.Stop()
	for {
		e.scanLines(ctx, work, running, &wg)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// scanLines starts a line for every subscription with ordered work, stops
// those empty for lineLinger, and refreshes the modes of the others.
func (e *Engine) scanLines(ctx context.Context, work *lanes, running map[string]*line, wg *sync.WaitGroup) {
	qctx, cancel := context.WithTimeout(ctx, lineScan)
	defer cancel()
	queued, err := queue.OrderedLines(qctx, e.js, e.cfg.Queue)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Debug("cannot list ordered lines", "err", err)
		}
		return
	}
	now := time.Now()
	for sub, l := range running {
		switch {
		case queued[sub] > 0:
			l.empty = time.Time{}
		case l.empty.IsZero():
			l.empty = now
		case now.Sub(l.empty) > lineLinger:
			l.stop()
			delete(running, sub)
		}
	}
	for sub, n := range queued {
		if _, ok := running[sub]; ok || n == 0 {
			continue
		}
		lctx, stop := context.WithCancel(ctx)
		l := &line{sub: sub, stop: stop}
		running[sub] = l
		wg.Go(func() { e.pullLine(lctx, work, l) })
	}
	if len(running) == 0 {
		return
	}
	modes, err := e.store.Orderings(qctx)
	if err != nil {
		// A line not read yet waits as strict until the index answers:
		// it exists because a bridge found its subscription ordered.
		e.log.Warn("cannot read the ordering index; lines keep their modes", "err", err)
		for _, l := range running {
			if l.ordering() == "" {
				l.mode.Store(proto.OrderingStrict)
			}
		}
		return
	}
	for sub, l := range running {
		l.mode.Store(modes[sub].Or(e.cfg.Ordering).Or(proto.OrderingNone))
	}
}

// pullLine pulls l's consumer until ctx is done.
func (e *Engine) pullLine(ctx context.Context, work *lanes, l *line) {
	log := e.log.With("subscription_id", l.sub)
	// A line no longer pulled here is not failing here.
	defer e.lineFaults.ok(l.sub)
	backoff := minReopen
	for ctx.Err() == nil {
		if l.ordering() == "" {
			// Not read yet (the first scan is still running).
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		cons, err := queue.EnsureOrderedConsumer(ctx, e.js, e.cfg.Queue, l.sub)
		var it jetstream.MessagesContext
		if err == nil {
			// The consumer's MaxAckPending 1 lets out one item at a time
			// whatever the batch; the batch sizes the iterator's buffer,
			// which also takes the server's status messages (idle
			// heartbeats, 408 expiries, pin errors). With a buffer of
			// one, a pull still open while this loop waits in work.put
			// (two pulls overlap after a missed heartbeat) overflows it:
			// "slow consumer, messages dropped", and a dropped expiry
			// leaves the iterator counting a pull the server forgot, so
			// the line stalls until the next missed heartbeat. With 8 (a
			// re-pull once fewer than 4 remain, or on expiry) an open
			// pull's heartbeat and expiry fit, and the next item comes on
			// it as soon as the one out is acked.
			it, err = cons.Messages(jetstream.PullMaxMessages(8),
				jetstream.PullExpiry(queue.OrderedPullExpiry),
				jetstream.PullPriorityGroup(queue.OrderedGroup))
		}
		if err != nil {
			if ctx.Err() == nil {
				e.lineFaults.fail(l.sub, err, time.Now())
				log.Warn("cannot pull an ordered line; retrying", "err", err, "retry_in", backoff)
				sleep(ctx, backoff)
				backoff = min(2*backoff, maxReopen)
			}
			continue
		}
		e.lineFaults.ok(l.sub)
		backoff = minReopen
		stopFetch := context.AfterFunc(ctx, it.Drain)
		for {
			m, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					break
				}
				if lineGone(ctx, cons, err) {
					// A server restarted without it (its state was in
					// memory): the iterator only misses heartbeats.
					// Make it again; it starts at the first unacked item.
					log.Info("ordered line's consumer is gone; making it again", "err", err)
					it.Stop()
					break
				}
				continue
			}
			if ctx.Err() != nil {
				release(m)
				continue
			}
			q := queued{m: m, withdraw: e.lineAlive.track(m), line: l}
			q.md, _ = m.Metadata()
			if !work.put(ctx, q, q.comesBack()) {
				q.withdraw()
				release(m)
			}
		}
		stopFetch()
	}
}

// waitInLine decides a wait of a line's item: it stays in the line as a
// delayed nak when the mode keeps it (true), or leaves (false: wait
// schedules a wake-up into the shared work subject, even for a wait short
// enough to be a delayed nak elsewhere).
func (e *Engine) waitInLine(h *handling, until time.Time, reason string) (settlement, bool) {
	if h.line == nil || !h.line.keeps(h.delivery(), reason == reasonRetry) {
		return settlement{}, false
	}
	if stale := e.staleAt(h); until.After(stale) {
		until = stale
	}
	if reason != reasonRetry && reason != reasonEarly {
		if settled, s := e.afterWrite(h, e.noteWait(h, &until, reason)); settled {
			return s, true
		}
	}
	e.reportWait(h, reason, until)
	return shortNak(max(0, time.Until(until))), true
}

// holdInLine keeps a paused subscription's item in its line when the mode
// keeps it: the line waits, in order, and is re-checked every
// InactiveRecheck, so the held deliveries go out in order once it is
// ACTIVE again (the usual hold would release them in any order).
func (e *Engine) holdInLine(h *handling, reason string) (settlement, bool) {
	if h.line == nil || !h.line.keeps(h.delivery(), false) {
		return settlement{}, false
	}
	if settled, s := e.afterWrite(h, e.noteWait(h, nil, reason)); settled {
		return s, true
	}
	e.reportWait(h, reason, time.Time{})
	return shortNak(e.cfg.InactiveRecheck), true
}

// settleInLine keeps a line's item in the line when a release for later
// (an infrastructure error, a secret not stored yet) would otherwise make
// it a wake-up in the shared work subject.
func settleInLine(h *handling, s settlement) settlement {
	if h.line == nil || s.kind != settleLater {
		return s
	}
	var d *proto.Delivery
	if h.rec != nil {
		d = h.delivery()
	}
	if !h.line.keeps(d, false) {
		return s
	}
	return shortNak(s.delay)
}

// lineGone reports whether the error err of a line's iterator means its
// consumer no longer exists. A standalone server that restarted forgets a
// line consumer (its state is in memory, queue/ordered.go), and the
// iterator does not end: it only reports missed heartbeats.
func lineGone(ctx context.Context, cons jetstream.Consumer, err error) bool {
	switch {
	case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
		return true
	case !errors.Is(err, jetstream.ErrNoHeartbeat):
		return false
	}
	ictx, cancel := context.WithTimeout(ctx, queue.OrderedPullExpiry)
	defer cancel()
	_, err = cons.Info(ictx)
	return errors.Is(err, jetstream.ErrConsumerNotFound)
}
