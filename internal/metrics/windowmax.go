package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Micrometer's TimeWindowMax defaults: a max over the last two minutes,
// kept in three buffers rotated every 40 s.
const (
	maxBuffers = 3
	maxRotate  = 40 * time.Second
)

// windowMax is the _max gauge Micrometer publishes beside a Timer's _count
// and _sum: the largest value recorded in the last two minutes per label
// set, decaying to 0 when nothing is recorded. Prometheus has no such type,
// so it is a collector that builds the gauges at scrape time.
type windowMax struct {
	desc   *prometheus.Desc
	now    func() time.Time
	mu     sync.Mutex
	series map[string]*maxRing
}

type maxRing struct {
	labels  []string
	buf     [maxBuffers]float64
	cur     int
	rotated time.Time
}

func newWindowMax(name, help string, labels []string) *windowMax {
	return &windowMax{
		desc:   prometheus.NewDesc(name, help, labels, nil),
		now:    time.Now,
		series: make(map[string]*maxRing),
	}
}

// ring returns the series of the label values lvs, created if new.
func (w *windowMax) ring(lvs []string) *maxRing {
	key := strings.Join(lvs, "\xff")
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.series[key]
	if r == nil {
		r = &maxRing{labels: lvs, rotated: w.now()}
		w.series[key] = r
	}
	return r
}

// observeRing records v in r, one of w's series (ring).
func (w *windowMax) observeRing(r *maxRing, v float64) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	r.rotate(now)
	// Every buffer sees every value; rotation clears the oldest, so the
	// current one holds the max since it was last cleared.
	for i := range r.buf {
		r.buf[i] = max(r.buf[i], v)
	}
}

func (r *maxRing) rotate(now time.Time) {
	for n := 0; now.Sub(r.rotated) >= maxRotate && n < maxBuffers; n++ {
		r.buf[r.cur] = 0
		r.cur = (r.cur + 1) % maxBuffers
		r.rotated = r.rotated.Add(maxRotate)
	}
	if now.Sub(r.rotated) >= maxRotate {
		// Idle for longer than the whole window: everything is cleared.
		r.rotated = now
	}
}

func (w *windowMax) Describe(ch chan<- *prometheus.Desc) { ch <- w.desc }

func (w *windowMax) Collect(ch chan<- prometheus.Metric) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.series {
		r.rotate(now)
		ch <- prometheus.MustNewConstMetric(w.desc, prometheus.GaugeValue, r.buf[r.cur], r.labels...)
	}
}
