package bench

import (
	"fmt"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/jetrelay/jetrelay/internal/app"
)

// sendWaitSeries is the engine's histogram of the time before each send,
// by stage (docs/observability.md).
const sendWaitSeries = "jetrelay_send_wait_seconds"

// sendWaits is the time before each send of a case, by stage, summed over
// its stacks' histograms: queue (from the work item's storage in the
// stream to the start of its handling) and prepare (from there to the
// send: the Redis reads and the decisions).
type sendWaits struct{ queue, prepare histogram }

// histogram is one series' cumulative buckets.
type histogram struct {
	bounds []float64 // upper bounds in seconds, +Inf last
	counts []uint64  // cumulative
}

// readSendWaits gathers the stacks' send-wait histograms; nil when none
// of them has one.
func readSendWaits(stacks []*app.Stack) (*sendWaits, error) {
	w := &sendWaits{}
	seen := false
	for _, st := range stacks {
		if st == nil || st.Metrics() == nil {
			continue
		}
		families, err := st.Metrics().Registry().Gather()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", sendWaitSeries, err)
		}
		for _, f := range families {
			if f.GetName() != sendWaitSeries {
				continue
			}
			for _, m := range f.GetMetric() {
				switch stageOf(m) {
				case "queue":
					w.queue.add(m.GetHistogram())
				case "prepare":
					w.prepare.add(m.GetHistogram())
				}
				seen = true
			}
		}
	}
	if !seen {
		return nil, nil
	}
	return w, nil
}

func stageOf(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "stage" {
			return l.GetValue()
		}
	}
	return ""
}

// add sums h into the histogram (every stack has the same buckets).
func (x *histogram) add(h *dto.Histogram) {
	if h == nil {
		return
	}
	if x.bounds == nil {
		for _, b := range h.GetBucket() {
			x.bounds = append(x.bounds, b.GetUpperBound())
		}
		x.bounds = append(x.bounds, math.Inf(1))
		x.counts = make([]uint64, len(x.bounds))
	}
	for i, b := range h.GetBucket() {
		if i < len(x.counts)-1 {
			x.counts[i] += b.GetCumulativeCount()
		}
	}
	x.counts[len(x.counts)-1] += h.GetSampleCount()
}

// n is how many observations the histogram holds.
func (x *histogram) n() uint64 {
	if len(x.counts) == 0 {
		return 0
	}
	return x.counts[len(x.counts)-1]
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linearly within the bucket it falls in (from 0 for the first),
// the highest finite bound when it falls in +Inf's.
func (x *histogram) quantile(q float64) time.Duration {
	total := x.n()
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	for i, c := range x.counts {
		if float64(c) < rank {
			continue
		}
		if math.IsInf(x.bounds[i], 1) {
			return seconds(x.bounds[max(i-1, 0)])
		}
		lo, below := 0.0, uint64(0)
		if i > 0 {
			lo, below = x.bounds[i-1], x.counts[i-1]
		}
		inBucket := c - below
		if inBucket == 0 {
			return seconds(x.bounds[i])
		}
		return seconds(lo + (x.bounds[i]-lo)*(rank-float64(below))/float64(inBucket))
	}
	return seconds(x.bounds[len(x.bounds)-2])
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// line is the waits as the reports give them.
func (w *sendWaits) line() string {
	return fmt.Sprintf("in the stream → handled p50 %s, p99 %s; handled → sent (the Redis reads and the decisions) p50 %s, p99 %s",
		ms(w.queue.quantile(0.5)), ms(w.queue.quantile(0.99)), ms(w.prepare.quantile(0.5)), ms(w.prepare.quantile(0.99)))
}
