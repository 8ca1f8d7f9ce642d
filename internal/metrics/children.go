package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// childKey names one child of a vector by its label values in the vector's
// order, each already capped (capped.value, oneOf), so never empty; the
// places past the vector's labels stay empty. The capped sets bound the
// number of keys as they bound the series.
type childKey [3]string

// children keeps the children of one vector that every delivered delivery
// touches (attempts, successes, latencies, sends), so that a delivery costs
// a map lookup under a read lock instead of client_golang's WithLabelValues
// (a label slice allocated, hashed and looked up under the vector's own
// lock) for each of them. A child is created the first time its labels are
// seen, exactly as WithLabelValues would create it, so /metrics shows the
// same series.
type children[T any] struct {
	labels int // the vector's number of labels
	new    func(lvs []string) T
	mu     sync.RWMutex
	m      map[childKey]T
}

func newChildren[T any](labels int, create func(lvs []string) T) *children[T] {
	return &children[T]{labels: labels, new: create, m: make(map[childKey]T)}
}

// get returns the child for k, created if new.
func (c *children[T]) get(k childKey) T {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok {
		return v
	}
	v = c.new(append([]string(nil), k[:c.labels]...))
	c.m[k] = v
	return v
}

// latencySeries is one label set of the latency summary and its window max.
type latencySeries struct {
	summary prometheus.Observer
	max     *maxRing
}
