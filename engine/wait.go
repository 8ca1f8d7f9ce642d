package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// wait puts the delivery off until until without consuming an attempt, and
// never past the stale cutoff, which must still fail it on time.
//
// A short retry wait (ParkAfter or less, 1 s by default: the first retry of
// the default policy) stays a delayed nak: it holds one MaxAckPending slot
// for about as long as a send does, and is exact, where a message schedule
// fires on the server's 250 ms timer tick (up to ~260 ms late for
// sub-second due times, a quarter of such a wait). Every longer wait and
// every put-off becomes the delivery's wake-up, a JetStream message schedule
// on its own subject (queue.NewScheduleMsg), and the work item is acked: a
// delayed nak would hold a MaxAckPending slot for its whole delay, and
// thousands of deliveries waiting on one dead endpoint would starve every
// other subscription. The item is acked only after the record says when and
// why it waits and the schedule is stored (its PubAck), so a crash in
// between leaves the item to be redelivered, never lost.
//
// A fast subscription's busy wait (busyWait) is as short as a retry's
// and stays a delayed nak too. A subscription that answers within
// FastAnswer frees a slot within milliseconds, and its refused deliveries
// come back within about a send's time (below): writing each one's
// record and wake-up, acking it and reading the wake-up back cost more
// than a delivery, for a wait of about a tenth of a second. Measured draining a
// preloaded backlog to one fast receiver: in some runs the pool's workers
// outnumbered the subscription's slots, most deliveries were put off once
// (8.1 Redis commands per delivery instead of 4.1) and jetrelay spent 60 %
// more CPU per delivery: the "slow mode" of issue 22. Such a wait is not
// written to the record (it is over before admin could show it); it is
// reported like every put-off. Two bounds keep these naks from holding the
// consumer's MaxAckPending slots the way the rule above forbids: the
// subscription must be freeing slots now (adaptive.Pool.Freeing: an answer
// within FastAnswer, or sends begun less than FastAnswer ago, so an
// endpoint that answered fast and then stopped answering is put off as
// before), and a replica issues at most
// MaxAckPending/parkShare of them per ParkAfter, the longest any of them
// lasts (shortNaks), as it parks at most that many. A delivery of a
// subscription freeing slots that gets no short wait (the budget spent,
// or its turn more than ParkAfter away) is parked in the subscription's
// wait line (spillBusy) rather than written while the line has room: a
// machine too busy for the budget otherwise turned most refusals into
// wake-ups.
//
// Only a busy wait that is written, or waits in an ordered line, comes
// back BusyWaitMin from now at the earliest: each of its returns costs a
// write and a wake-up. A fast subscription's short busy wait comes back
// when its virtual queue says (adaptive.Pool.Acquire: its send time, then
// spaced by its send time over its capacity, the capacity a new
// subscription starts with at least), fastAnswer from now at the earliest
// (busyWait). With BusyWaitMin on them too, the last deliveries refused a
// slot while a drain to ten fast receivers saturated the CPU waited a
// whole second after everything else had gone out: the drain (`jetrelay
// bench --scenario costmodel --subs 10`) took a fifth longer than the same
// backlog for one subscription.
func (e *Engine) wait(h *handling, until time.Time, reason string) settlement {
	shortBusy := false
	if reason == reasonBusy {
		until, shortBusy = e.busyWait(h, until)
		if !shortBusy && e.spillBusy(h) {
			return parkedInLine()
		}
	}
	if s, ok := e.waitInLine(h, until, reason); ok {
		return s
	}
	if stale := e.staleAt(h); until.After(stale) {
		until = stale
	}
	w := time.Until(until)
	if w <= 0 && !shortBusy {
		return nakAfter(0)
	}
	// A short busy wait has spent its budget: it is one, even if the stale
	// cutoff shortened it to nothing.
	if shortBusy || w <= e.cfg.ParkAfter && h.line == nil && (reason == reasonRetry || reason == reasonEarly) {
		e.reportWait(h, reason, until)
		return shortNak(max(w, 0))
	}
	d := h.delivery()
	if reason == reasonBusy && e.inflight.pool.Stalled(d.SubscriptionID, stallAfter) {
		// Its sends hang: its next deliveries wait in Redis (intakehold.go).
		e.intake.hold(h, reasonBusy, until)
	}
	msg := queue.NewScheduleMsg(e.cfg.Queue, h.id, until)
	queue.SetRoute(msg, queue.Route{SubscriptionID: d.SubscriptionID, EventID: d.EventID})
	span := e.startWaiting(h, msg, until)
	note := reason
	if reason == reasonRetry || reason == reasonEarly {
		// A retry's time was written with its failure; an early copy's is
		// already in the record.
		note = ""
	}
	noteErr, err := e.putOffNow(h, &until, note, msg)
	endWaiting(span, errors.Join(noteErr, err))
	if settled, s := e.afterWrite(h, noteErr); settled {
		return s
	}
	if err != nil {
		return e.infraRetry(h, fmt.Errorf("schedule wake-up: %w", err))
	}
	e.reportWait(h, reason, until)
	return ack()
}

// busyWait is when h, refused a slot of its busy subscription and told to
// come back at back, comes back, and whether it waits as a short delayed
// nak (see wait): a fast subscription's wait within ParkAfter and this
// replica's budget of such waits (spending one of it) comes back at back,
// fastAnswer from now at the earliest; any other waits BusyWaitMin at
// least.
//
// fastAnswer is as long as a worker waits for such a slot before the
// delivery is refused, and bounds the churn of a delivery refused again
// and again: back is spaced for the subscription's capacity, but at least
// for the capacity a new subscription starts with (adaptive.Pool.Acquire),
// so while its limit is cut below that, its deliveries would come back
// faster than its slots free. Each return costs a redelivery, a read and
// an admission; at most ten a second per waiting delivery, and the budget
// bounds them all.
func (e *Engine) busyWait(h *handling, back time.Time) (time.Time, bool) {
	if h.line == nil && time.Until(back) <= e.cfg.ParkAfter &&
		e.inflight.pool.Freeing(h.delivery().SubscriptionID) && e.shortBusy.take(h.now) {
		return later(back, h.now.Add(fastAnswer)), true
	}
	return later(back, h.now.Add(e.cfg.BusyWaitMin)), false
}

// shortNaks is a replica's budget of short busy waits: at most most per
// window (ParkAfter, the longest one lasts), so no more than twice most
// hold a MaxAckPending slot at any moment.
type shortNaks struct {
	window time.Duration
	most   int

	mu    sync.Mutex
	start time.Time
	n     int
}

// take counts one more short wait at now, or reports false when the
// window's budget is spent.
func (b *shortNaks) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.start) >= b.window {
		b.start, b.n = now, 0
	}
	if b.n >= b.most {
		return false
	}
	b.n++
	return true
}

// scheduleEnd is when the delivery's retry schedule would have ended had
// every attempt been made: its first attempt (attempted_at, its creation)
// plus the sum of its policy's delays, plus one open period of the breaker.
// A breaker may hold a delivery back until then, never longer (DESIGN
// decision 8): the delivery then gets its last-chance send
// (admitThrough), because the reference fails a dead endpoint's
// deliveries on that timeline and auto-disable counts on it. The open
// period added is the first one, not the one the breaker has doubled to.
func (e *Engine) scheduleEnd(h *handling) time.Time {
	stale := e.staleAt(h)
	end := attemptedAt(h.delivery(), h.now).Add(e.cfg.Breaker.OpenFor)
	policy := h.sub().Policy()
	for a := 1; a <= policy.Retries() && end.Before(stale); a++ {
		end = end.Add(policy.Delay(a))
	}
	return end
}

// noteWait writes why and until when a delivery waits, on its own (waitNote;
// put-offs write it in bulk, putOffNow).
func (e *Engine) noteWait(h *handling, next *time.Time, reason string) error {
	note := waitNote(next, reason)
	_, err := e.write(h, nil, func(cur *proto.Delivery, _ *proto.Subscription) (store.Patch, store.Patch, error) {
		return note(cur), nil, nil
	})
	return err
}

// publishWaiting stores a wake-up or a held delivery in the dispatch stream
// and waits for its PubAck, on a context that survives shutdown (the
// decision was taken; only the item's ack is still to come).
func (e *Engine) publishWaiting(ctx context.Context, m *nats.Msg) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	_, err := e.js.PublishMsg(wctx, m, jetstream.WithExpectStream(e.cfg.Queue.Stream))
	return err
}

// reportWait reports a wait (a hold has no until).
func (e *Engine) reportWait(h *handling, reason string, until time.Time) {
	e.report(h, Decision{Kind: PutOff, Reason: reason}, until, "")
}
