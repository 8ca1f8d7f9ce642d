package engine

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// The writer is a hook here so the interleaving is forced, not hoped for:
// the first put-off's write is held until every other one has queued.
func TestPutOffs_PutOffsArrivingDuringAWriteGoOutTogetherInTheNext(t *testing.T) {
	const others = 9
	first := make(chan struct{})
	release := make(chan struct{})
	var mu sync.Mutex
	var batches [][]*putOff
	q := &putOffs{}
	q.write = func(b []*putOff) {
		mu.Lock()
		batches = append(batches, b)
		n := len(batches)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release
		}
		for _, p := range b {
			p.pubErr = fmt.Errorf("published %p", p) // each learns its own outcome
		}
	}
	var wg sync.WaitGroup
	results := make([]error, others+1)
	items := make([]*putOff, others+1)
	for i := range items {
		items[i] = &putOff{}
	}
	wg.Go(func() { _, results[0] = q.do(items[0]) })
	<-first
	for i := 1; i <= others; i++ {
		wg.Go(func() { _, results[i] = q.do(items[i]) })
	}
	// Every other put-off is queued behind the write in progress.
	for {
		q.mu.Lock()
		n := len(q.queued)
		q.mu.Unlock()
		if n == others {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()

	if len(batches) != 2 || len(batches[0]) != 1 || len(batches[1]) != others {
		sizes := make([]int, len(batches))
		for i, b := range batches {
			sizes[i] = len(b)
		}
		t.Fatalf("batches of %v, want [1 %d]: the put-offs queued during a write are written together", sizes, others)
	}
	for i, p := range items {
		if want := fmt.Sprintf("published %p", p); results[i] == nil || results[i].Error() != want {
			t.Errorf("put-off %d got %v, want its own outcome %q", i, results[i], want)
		}
	}
	if q.writing || len(q.queued) != 0 {
		t.Errorf("after the writes: writing %v, %d queued", q.writing, len(q.queued))
	}
}

func TestPutOffs_ALonePutOffIsWrittenAtOnceAndABigQueueInBoundedBatches(t *testing.T) {
	var sizes []int
	q := &putOffs{write: func(b []*putOff) {
		sizes = append(sizes, len(b))
		for _, p := range b {
			p.noteErr = errors.New("noted")
		}
	}}
	if noteErr, _ := q.do(&putOff{}); noteErr == nil || len(sizes) != 1 || sizes[0] != 1 {
		t.Fatalf("lone put-off: %v, batches %v", noteErr, sizes)
	}
	// A writer that finds more queued than one batch holds writes them all,
	// putOffBatch at a time.
	sizes = nil
	for range putOffBatch + 3 {
		q.queued = append(q.queued, &putOff{done: make(chan struct{})})
	}
	q.do(&putOff{})
	if len(sizes) != 2 || sizes[0] != putOffBatch || sizes[1] != 4 {
		t.Fatalf("batches %v, want [%d 4]", sizes, putOffBatch)
	}
}
