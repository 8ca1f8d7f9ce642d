package adaptive

import (
	"container/heap"
	"context"
	"time"
)

// Model is an endpoint as a simulation sees it: what a send started at
// (time since the start) with inflight sends running, itself included,
// takes, and whether it is dropped.
type Model func(at time.Duration, inflight int) (latency time.Duration, dropped bool)

// Point is one endpoint's limit at one moment of a simulation.
type Point struct {
	At       time.Duration
	Limit    int
	InFlight int
}

// Simulate runs a Pool on a virtual clock for d: every endpoint of models
// has an endless backlog and the pool's Workers send to them, each worker
// taking the next endpoint in turn whose slot it gets. It returns each
// endpoint's limit every step. It is how the behaviour of the limits is
// tested and charted (docs/operations.md) without real time passing.
func Simulate(cfg PoolConfig, models []Model, d, step time.Duration) [][]Point {
	start := time.Unix(0, 0)
	now := start
	cfg.Now = func() time.Time { return now }
	p := NewPool(cfg)
	ids := make([]string, len(models))
	for i := range ids {
		ids[i] = string(rune('a' + i))
	}
	// A cancelled context: a fast endpoint at its limit is not waited for
	// (no real time passes here), the worker tries the next endpoint.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var running sends
	free, next := p.cfg.Workers, 0
	out := make([][]Point, len(models))
	const tick = time.Millisecond
	for at := time.Duration(0); at <= d; at += tick {
		now = start.Add(at)
		for running.Len() > 0 && running[0].end <= at {
			s := heap.Pop(&running).(send)
			p.Release(ids[s.model], s.latency, s.result)
			free++
		}
		// Each free worker tries every endpoint once, in turn.
		for tried := 0; free > 0 && tried < len(models); tried++ {
			i := next % len(models)
			next++
			if ok, _ := p.Acquire(ctx, ids[i]); !ok {
				continue
			}
			tried = -1
			latency, dropped := models[i](at, p.keys[ids[i]].inflight)
			r := Healthy
			if dropped {
				r = Dropped
			}
			heap.Push(&running, send{end: at + max(tick, latency), model: i, latency: latency, result: r})
			free--
		}
		if at%step == 0 {
			for i, id := range ids {
				pt := Point{At: at, Limit: p.cfg.Initial}
				if e := p.keys[id]; e != nil {
					pt.Limit, pt.InFlight = e.limit.Value(), e.inflight
				}
				out[i] = append(out[i], pt)
			}
		}
	}
	return out
}

type send struct {
	end     time.Duration
	model   int
	latency time.Duration
	result  Result
}

// sends is a min-heap of running sends by end time.
type sends []send

func (h sends) Len() int           { return len(h) }
func (h sends) Less(i, j int) bool { return h[i].end < h[j].end }
func (h sends) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sends) Push(x any)        { *h = append(*h, x.(send)) }
func (h *sends) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
