package engine

import (
	"context"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// lanes hand work items from the consumer to the workers in two lanes, so
// that work coming back does not queue in front of new work.
//
//   - new: an item's first handling (a delivery's first attempt, a
//     requeue).
//   - back: a wake-up that fired (a retry after its backoff, a put-off of
//     an open breaker or a busy subscription, a held-check) and every
//     redelivery (a retry's short nak, a release, an expired AckWait).
//
// JetStream fires message schedules on a timer tick (250 ms), so the
// wake-ups of a busy period arrive in bursts: at 2,000 put-offs a second,
// five hundred items at once, most of them (a breaker still open, a
// subscription still busy) handled only to be put off again. In one lane,
// every new delivery behind such a burst waits for all of it and shares
// Redis and the CPU with it (measured: the isolation benchmark's healthy
// p99 went from ~20 ms to ~40 ms once put-offs became schedules). In its
// own lane it waits only for a free worker.
//
// Workers take new work first, but prefer the back lane on every
// backShare-th pick, so work that comes back keeps a share of the workers
// while new work is plentiful and is never starved. The consumer hands items
// over as fast as it gets them until a lane is full: the back lane buffers
// a tick's burst (backDepth workers' worth), and a fuller burst waits in
// the fetch buffer, in stream order, as with one lane. A buffered item is kept
// alive (keepAlive) from the moment it is fetched, so a wait for a worker
// behind slow sends never outlives AckWait.
type lanes struct {
	fresh, back chan queued
	// woken is the busy subscriptions' wait lines' items leaving their
	// line (busyline.go), taken before anything else: a slot waits for
	// them. nil: none.
	woken <-chan queued
	// depth is how many items the new lane buffers now (the back lane
	// backDepth times as many): it follows the worker pool's live size
	// (workers.buffer), so a pool grown for slow receivers buffers more
	// and one shrunk back buffers less. The channels are made for the
	// largest depth.
	depth func() int
	// taken is signalled when a worker takes an item or the depth grows,
	// so a put waiting for room looks again.
	taken chan struct{}
	// retire wakes an idle worker so it can stop once the pool shrank
	// (workers.retire).
	retire chan struct{}
	closed atomic.Bool
}

// queued is a buffered work item, its metadata (nil when it has none:
// handle terms it) and the function that stops keeping it alive
// (keepAlive.track).
type queued struct {
	m        jetstream.Msg
	md       *jetstream.MsgMetadata
	withdraw func()
	line     *line   // the ordered line it came from, nil for the shared consumer's items
	parked   *parked // set when it comes out of a busy subscription's wait line
}

const (
	// backShare makes every backShare-th pick of a worker prefer the back
	// lane: work that comes back keeps at least about a quarter of the
	// workers while new work waits too.
	backShare = 4
	// backDepth is how many items the back lane buffers, in units of the
	// new lane's depth: with 64 workers 256 items, a 250 ms tick's worth
	// of 1,000 wake-ups a second. The items out at one replica
	// (MaxAckPending) are then at most the fetch buffer, both lanes and
	// the workers: the live workers + 6 × their buffer (workers.buffer).
	backDepth = 4
)

// Lanes, as indexes of Engine.taken.
const (
	laneNew = iota
	laneBack
)

// schedulerHeader is the header nats-server puts on the item a message
// schedule fired: it names the schedule's subject.
const schedulerHeader = "Nats-Scheduler"

// newLanes returns lanes of a fixed depth.
func newLanes(workers int) *lanes {
	return newSizedLanes(workers, func() int { return workers })
}

// newSizedLanes returns lanes whose depth follows depth(), at most most.
func newSizedLanes(most int, depth func() int) *lanes {
	return &lanes{fresh: make(chan queued, most), back: make(chan queued, backDepth*most), depth: depth,
		taken: make(chan struct{}, 1), retire: make(chan struct{})}
}

// comesBack says whether q is work that comes back rather than new work.
// An item without metadata goes into the new lane (handle terms it).
func (q queued) comesBack() bool {
	h := q.m.Headers()
	return h.Get(schedulerHeader) != "" || h.Get(queue.UnparkedHeader) != "" || q.md != nil && q.md.NumDelivered > 1
}

// put buffers q in its lane, waiting for room until ctx is done. Only
// the consumer's feeder puts, so room seen is room kept.
func (l *lanes) put(ctx context.Context, q queued, back bool) bool {
	ch, mult := l.fresh, 1
	if back {
		ch, mult = l.back, backDepth
	}
	for len(ch) >= min(cap(ch), mult*l.depth()) {
		select {
		case <-l.taken:
		case <-ctx.Done():
			return false
		}
	}
	select {
	case ch <- q:
		return true
	case <-ctx.Done():
		return false
	}
}

// roomChanged tells a put waiting for room to look again.
func (l *lanes) roomChanged() {
	select {
	case l.taken <- struct{}{}:
	default:
	}
}

// close ends both lanes once the consumer hands no more work; what is
// buffered can still be taken.
func (l *lanes) close() {
	l.closed.Store(true)
	close(l.fresh)
	close(l.back)
}

// next is a worker's next item: a woken one first, then new work unless
// turn is a multiple of backShare. It waits for one, and returns false
// once both lanes are closed and empty (done then says so) or when an
// idle worker is woken to retire.
func (l *lanes) next(turn int) (queued, bool) {
	select {
	case q := <-l.woken:
		return q, true
	default:
	}
	first, second := l.fresh, l.back
	if turn%backShare == 0 {
		first, second = second, first
	}
	select {
	case q, ok := <-first:
		if ok {
			l.roomChanged()
			return q, true
		}
		first = nil
	default:
	}
	for first != nil || second != nil {
		select {
		case q, ok := <-first:
			if ok {
				l.roomChanged()
				return q, true
			}
			first = nil
		case q, ok := <-second:
			if ok {
				l.roomChanged()
				return q, true
			}
			second = nil
		case q := <-l.woken:
			return q, true
		case <-l.retire:
			return queued{}, false
		}
	}
	return queued{}, false
}

// done reports whether the lanes are closed: no more work will come.
func (l *lanes) done() bool { return l.closed.Load() }

// backlog is how many items wait in the lanes for a worker.
func (l *lanes) backlog() int { return len(l.fresh) + len(l.back) + len(l.woken) }

// WorkStats counts the work items this replica's consumer handed to its
// workers since it started, by lane.
type WorkStats struct {
	// New is first handlings: deliveries the bridge queued, requeues.
	New uint64
	// Back is work that came back: fired wake-ups (retries, put-offs,
	// held-checks) and redeliveries. Back much larger than New means most
	// of the engine's work is deliveries put off again and again (an open
	// breaker, a busy subscription).
	Back uint64
}

// WorkStats reports the work items handed to the workers, by lane.
func (e *Engine) WorkStats() WorkStats {
	return WorkStats{New: e.taken[laneNew].Load(), Back: e.taken[laneBack].Load()}
}
