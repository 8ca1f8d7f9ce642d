package engine

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// workers is the engine's elastic worker pool. Its size follows demand
// rather than a fixed count: a replica sending to receivers that take
// 200 ms needs thousands of sends in flight to use its CPU, one sending to
// a receiver that answers in a millisecond needs a few dozen, and a fixed
// count is wrong for one of them (measured: 64 workers delivered 305/s to
// 100 subscriptions taking 200 ms with a quarter of a core busy; 2,048
// delivered 4,787/s).
//
// Every tick the pool looks at what held work back since the last one:
// deliveries turned away below their subscription's own adaptive limit
// (the pool's sharing held them back, adaptive.Pool.Demand) or work waiting
// in the lanes while (nearly) every worker was busy. A worker waiting for
// a slot of a subscription at its limit (adaptive.Pool.Waiting) is not
// counted busy: more workers would only wait beside it. If work was held
// back, the CPU is not saturated and memory is below the budget, it doubles
// (as a new subscription's limit does in slow start),
// up to what the busy subscriptions ask for (adaptive.Pool.Demand: the
// limit of one turned away, the sends it runs at once otherwise) plus a
// reserve, the cap (Config.Workers) and the memory
// budget's share (Config.MemoryBudget / perSendBytes). Otherwise it
// shrinks by a twentieth per tick toward the workers busy now, never below
// Config.MinWorkers. A saturated CPU holds it where it is: more sends in
// flight would only wait for the CPU too, and the subscriptions' latency
// signal cuts their limits. So a fast receiver is served by the floor's
// workers, as before, and slow ones get as many as the machine can drive.
//
// Beyond localShare times the floor, the pool grows only while its busy
// workers spend at least half their time sending (in a transport's
// Deliver, integrated over the tick, not sampled): workers waiting on
// receivers are what more workers help. When they wait on this replica's
// own work instead (their outcome writes queued behind one another, their
// Redis reads, the CPU), more workers only queue beside them, each holding
// its records, stack and connection: a fast receiver's backlog of 100,000
// across ten subscriptions grew the pool to 1,000 workers, 530 of them
// queued for their outcome writes and 81 sending, at no gain in rate.
type workers struct {
	floor, most int // Config.MinWorkers; the cap, the smaller of Config.Workers and the memory budget's share
	budget      int64
	size        atomic.Int64 // the pool's size now
	running     atomic.Int64 // worker goroutines
	busy        atomic.Int64 // workers handling an item
	busyTime    timeShare    // time workers spent handling items
	sendTime    timeShare    // time workers spent in a send (a transport's Deliver)
	lastBusy    time.Duration
	lastSend    time.Duration
	lastAt      time.Duration
	cpu         cpuMeter
	memory      []metrics.Sample
}

const (
	// sizeTick is how often the pool is resized: doubling, from 64 workers
	// to 2,048 in about half a second. With receivers taking 200 ms a
	// quarter-second tick held the pool small for a second and a half, and
	// deliveries queued behind it: 88-92 % of a fixed pool of 2,048 over a
	// 10,000-delivery run, p99 1.3-2.2 s; at 100 ms, 95-101 %, p99
	// 0.4-0.7 s (docs/deployment.md).
	sizeTick = 100 * time.Millisecond
	// shrinkShare is the part of the pool one tick gives up once nothing is
	// held back: a twentieth per 100 ms, about half in 1.4 s, so a lull of a
	// second between bursts does not undo the growth the bursts need.
	shrinkShare = 20
	// perSendBytes is what one send in flight is assumed to cost: its
	// goroutine's stack, its connection's buffers and goroutines, the
	// event's body and records. Measured with 200 ms receivers: about
	// 60 KiB per worker between 64 and 2,048 workers.
	perSendBytes = 64 << 10
	// saturatedCPU is the share of GOMAXPROCS the process may use before
	// the pool stops growing (cpuMeter also reports saturation when its
	// goroutines wait for a CPU, as on a machine busy with other work).
	saturatedCPU = 0.85
	// maxBuffer bounds the fetch buffer and the new lane (the back lane
	// holds backDepth times as many): enough to feed thousands of workers
	// between two fetches, without thousands of items more held against
	// MaxAckPending.
	maxBuffer = 512
	// recentDemand: a subscription asked for a slot within this long counts
	// in the pool's demand.
	recentDemand = time.Second
	// localShare times the floor is as far as the pool grows for work held
	// back while its workers mostly wait on this replica's own work rather
	// than on receivers: room for bursts and for reads and writes that
	// overlap, not a pool that grows without bound because work always
	// waits in a fast receiver's backlog.
	localShare = 4
	// receiverBound is the share of their busy time the workers must spend
	// sending for the pool to grow beyond localShare times the floor.
	receiverBound = 0.5
)

// epoch is where timeShare's clock starts: its readings are monotonic
// durations since.
var epoch = time.Now()

// timeShare integrates how long workers spend in one state: the time of
// the spans that ended plus, at any instant, those still running (n spans
// running for now minus the sum of their starts). Readings taken between
// another goroutine's loads may be off by one span's length, nothing that
// matters against a tick of many workers.
type timeShare struct {
	n      atomic.Int64
	starts atomic.Int64 // sum of the running spans' starts, ns since epoch
	done   atomic.Int64 // ns of the spans that ended
}

// sinceEpoch is timeShare's clock.
func sinceEpoch() time.Duration { return time.Since(epoch) }

// begin counts a span starting at now and returns its start for end.
func (s *timeShare) begin(now time.Duration) time.Duration {
	s.n.Add(1)
	s.starts.Add(int64(now))
	return now
}

// end counts the span that began at start as ended at now.
func (s *timeShare) end(start, now time.Duration) {
	s.n.Add(-1)
	s.starts.Add(-int64(start))
	s.done.Add(int64(now - start))
}

// total is the time spent in the state up to now.
func (s *timeShare) total(now time.Duration) time.Duration {
	return time.Duration(s.done.Load() + s.n.Load()*int64(now) - s.starts.Load())
}

// sendShare is the share of the workers' busy time from the last call to
// now that they spent sending, the workers waiting for a slot (the
// snapshot of those waiting now, held for the whole interval) not counted
// busy.
func (w *workers) sendShare(now time.Duration, waitingSlots int) float64 {
	busy, send := w.busyTime.total(now), w.sendTime.total(now)
	dBusy, dSend, dt := busy-w.lastBusy, send-w.lastSend, now-w.lastAt
	w.lastBusy, w.lastSend, w.lastAt = busy, send, now
	dBusy -= time.Duration(waitingSlots) * dt
	if dBusy <= 0 {
		return 0
	}
	return min(1, float64(dSend)/float64(dBusy))
}

func newWorkers(floor, most int, budget int64) *workers {
	if budget > 0 {
		most = max(1, min(most, int(budget/2/perSendBytes)))
	}
	w := &workers{floor: min(floor, most), most: most, budget: budget,
		memory: []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}}
	w.size.Store(int64(w.floor))
	return w
}

// now is the pool's size now.
func (w *workers) now() int { return int(w.size.Load()) }

// buffer is how many items the fetch buffer and the new lane hold now.
func (w *workers) buffer() int { return min(w.now(), maxBuffer) }

// leave says whether a worker should stop because the pool shrank below
// the goroutines running, and if so counts it out.
func (w *workers) leave() bool {
	for {
		r := w.running.Load()
		if r <= w.size.Load() {
			return false
		}
		if w.running.CompareAndSwap(r, r-1) {
			return true
		}
	}
}

// memoryInUse is the Go runtime's memory not returned to the OS: about
// the process's resident memory.
func (w *workers) memoryInUse() int64 {
	metrics.Read(w.memory)
	return int64(w.memory[0].Value.Uint64() - w.memory[1].Value.Uint64())
}

// pressure is what one tick saw.
type pressure struct {
	want     int     // what the busy subscriptions ask for (adaptive.Pool.Demand)
	squeezed int     // deliveries held back by the pool's sharing
	waiting  int     // items waiting in the lanes for a worker
	busy     int     // workers handling an item, but for those waiting for a subscription's slot
	sending  float64 // share of the busy workers' time spent sending since the last tick, 0..1
	cpu      float64 // share of GOMAXPROCS the process used, 0..1+
	memory   int64   // bytes in use
}

// resize computes the pool's next size from what the last tick saw.
func (w *workers) resize(p pressure) int {
	size := w.now()
	// Work waiting while (nearly) every worker is busy: a sample between
	// two items of a worker must not read as idle.
	short := p.squeezed > 0 || p.waiting > 0 && p.busy >= size-size/8
	// Beyond localShare times the floor, only workers waiting on
	// receivers call for more.
	local := w.floor * localShare
	onReceivers := p.sending >= receiverBound
	heldBack := short && (size < local || onReceivers)
	switch {
	case w.budget > 0 && p.memory > w.budget:
		size -= size / 4
	case heldBack && p.cpu < saturatedCPU && (w.budget <= 0 || p.memory < w.budget*3/4):
		// Up to what the subscriptions could take, with room for the
		// reserve and the work around the sends.
		bound := p.want + p.want/4 + w.floor
		if !onReceivers {
			bound = min(bound, local)
		}
		size = max(size, min(size+max(size, 8), bound))
	case heldBack:
		// Saturated: hold.
	case short:
		// Held back by its own work, not by its receivers: back toward
		// localShare times the floor, a twentieth per tick.
		size = max(local, size-max(1, size/shrinkShare))
	default:
		// Toward the workers busy now and a reserve of a quarter, which
		// grows the pool only as far as growing is allowed.
		keep := p.busy + p.busy/4
		if !onReceivers {
			keep = min(keep, max(size, local))
		}
		size = max(keep, size-max(1, size/shrinkShare))
	}
	return max(w.floor, min(size, w.most))
}

// run resizes the pool every sizeTick until ctx is done, starting workers
// with spawn as it grows and waking idle ones as it shrinks.
func (e *Engine) sizeWorkers(ctx context.Context, work *lanes, f *fetched, spawn func()) {
	w := e.workers
	t := time.NewTicker(sizeTick)
	defer t.Stop()
	w.cpu.sample()
	w.sendShare(sinceEpoch(), 0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		want, squeezed := e.inflight.pool.Demand(recentDemand)
		// A worker waiting for a slot of its subscription, at its limit,
		// is busy only with waiting: more workers would wait beside it.
		// Counted busy, it made the pool grow for a fast receiver's
		// backlog to three times the subscription's limit, and the
		// workers the subscription could not take turned deliveries away
		// (issue 22's slow mode).
		busy := max(0, int(w.busy.Load())-e.inflight.pool.Waiting())
		p := pressure{want: want, squeezed: squeezed, waiting: work.backlog(), busy: busy,
			sending: w.sendShare(sinceEpoch(), e.inflight.pool.Waiting()), cpu: w.cpu.sample()}
		if w.budget > 0 {
			p.memory = w.memoryInUse()
		}
		before, after := w.now(), w.resize(p)
		if after == before {
			continue
		}
		w.size.Store(int64(after))
		e.inflight.pool.SetWorkers(after)
		if after > before {
			for w.running.Load() < int64(after) {
				w.running.Add(1)
				spawn()
			}
			work.roomChanged()
			f.roomChanged()
			continue
		}
		for range before - after {
			select {
			case work.retire <- struct{}{}:
			default:
			}
		}
	}
}

// runWorkers starts the pool's first workers and returns the function that
// starts one more; wg counts them all.
func (e *Engine) runWorkers(ctx, workCtx context.Context, work *lanes, wg *sync.WaitGroup) func() {
	w := e.workers
	spawn := func() {
		wg.Go(func() {
			for turn := 1; ; turn++ {
				q, ok := work.next(turn)
				if !ok {
					if work.done() {
						w.running.Add(-1)
						return
					}
					if w.leave() {
						return
					}
					continue
				}
				if q.parked != nil {
					e.busy.took()
				}
				if ctx.Err() != nil {
					// Buffered but not started: hand it straight back so
					// another replica can take it now rather than after
					// AckWait.
					q.withdraw()
					release(q.m)
					continue
				}
				w.busy.Add(1)
				start := w.busyTime.begin(sinceEpoch())
				e.handle(workCtx, q)
				w.busyTime.end(start, sinceEpoch())
				w.busy.Add(-1)
				if w.leave() {
					return
				}
			}
		})
	}
	for range w.now() {
		w.running.Add(1)
		spawn()
	}
	return spawn
}

// PoolStats is the engine's worker pool as the operator view and the
// metrics show it.
type PoolStats struct {
	// Workers is the pool's size now.
	Workers int
	// Busy is how many of them handle a work item.
	Busy int
	// Min and Max bound the size: Config.MinWorkers, and the smaller of
	// Config.Workers and the memory budget's share.
	Min, Max int
}

// PoolStats reports the worker pool's size.
func (e *Engine) PoolStats() PoolStats {
	w := e.workers
	return PoolStats{Workers: w.now(), Busy: int(w.busy.Load()), Min: w.floor, Max: w.most}
}

// cpuMeter measures the share of GOMAXPROCS the process used between two
// samples, and how often its goroutines waited long to run: on a machine
// shared with other processes the CPUs may be busy with their work while
// this process uses little, and more sends in flight would only wait for
// a CPU too.
type cpuMeter struct {
	at    time.Time
	cpu   time.Duration
	sched []metrics.Sample
	prev  []uint64 // the scheduling-latency histogram's counts at the last sample
}

// sample returns the share used since the last sample (0 the first time),
// or 1 when more than a quarter of the goroutines that ran since waited
// longer than lateRun for a CPU.
func (c *cpuMeter) sample() float64 {
	now, cpu := time.Now(), processCPU()
	prevAt, prevCPU := c.at, c.cpu
	c.at, c.cpu = now, cpu
	late := c.lateRuns()
	if prevAt.IsZero() || cpu <= 0 {
		return 0
	}
	if late > 0.25 {
		return 1
	}
	wall := now.Sub(prevAt) * time.Duration(runtime.GOMAXPROCS(0))
	if wall <= 0 {
		return 0
	}
	return float64(cpu-prevCPU) / float64(wall)
}

// lateRun is a scheduling latency that means the CPUs are saturated: a
// whole time slice (the scheduler preempts a goroutine after 10 ms), not
// the short waits of a burst of sends answered at once.
const lateRun = 10 * time.Millisecond

// lateRuns is the share of goroutine schedulings since the last call that
// waited longer than lateRun to run.
func (c *cpuMeter) lateRuns() float64 {
	if c.sched == nil {
		c.sched = []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	}
	metrics.Read(c.sched)
	if c.sched[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := c.sched[0].Value.Float64Histogram()
	first := c.prev == nil
	if len(c.prev) != len(h.Counts) {
		c.prev = make([]uint64, len(h.Counts))
	}
	var all, late uint64
	for i, n := range h.Counts {
		d := n - c.prev[i]
		c.prev[i] = n
		all += d
		if h.Buckets[i] >= lateRun.Seconds() {
			late += d
		}
	}
	if first || all == 0 {
		return 0
	}
	return float64(late) / float64(all)
}
