package bench

import "runtime/metrics"

// heapCounts are the Go runtime's cumulative allocation and GC counters
// (runtime/metrics). They depend far less than CPU time on how busy the
// machine is: the bytes and objects one delivery allocates change with
// the code and, a little, with how deliveries happen to batch (about 2 %
// between runs), so a cut of several per cent shows where a CPU figure's
// run-to-run spread of a fifth or more would hide it.
type heapCounts struct {
	bytes, objects, cycles uint64
}

// The objects are /gc/heap/allocs:objects, which counts a block of tiny
// objects once, plus /gc/heap/tiny/allocs:objects, the tiny objects in
// them: every allocation, as runtime.MemStats.Mallocs counts them.
var heapSamples = []string{"/gc/heap/allocs:bytes", "/gc/heap/allocs:objects", "/gc/heap/tiny/allocs:objects", "/gc/cycles/total:gc-cycles"}

// heapNow reads heapCounts; a counter the runtime does not know reads 0.
func heapNow() heapCounts {
	s := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return heapCounts{bytes: v(0), objects: v(1) + v(2), cycles: v(3)}
}

// sub is the change from a to h.
func (h heapCounts) sub(a heapCounts) heapCounts {
	return heapCounts{bytes: h.bytes - a.bytes, objects: h.objects - a.objects, cycles: h.cycles - a.cycles}
}
