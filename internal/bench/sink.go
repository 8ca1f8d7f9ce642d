package bench

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// sink is the performance scenario's receiver: it verifies each request's
// signature as a Cycles receiver must, optionally takes delay to answer,
// and remembers only the event id, path and time of each receipt, so that
// 100,000 of them cost a few MB and the process's RSS stays jetrelay's.
type sink struct {
	delay    time.Duration
	mu       sync.Mutex
	secrets  map[string]string // path → signing secret
	got      []receipt
	requests atomic.Int64
	bad      atomic.Int64 // unsigned, badly signed or unknown path: answered 401/404
	bufs     sync.Pool
	// held, while set, keeps every verified request waiting until its
	// channel is closed (hold, release); atomic, so that the receiver's
	// every request does not take a lock for it.
	held atomic.Pointer[chan struct{}]
}

// receipt is one accepted request.
type receipt struct {
	eventID, path string
	at            time.Time
}

func newSink(delay time.Duration) *sink {
	return &sink{delay: delay, secrets: map[string]string{}, bufs: sync.Pool{New: func() any { return new(bytes.Buffer) }}}
}

// expect registers path with its signing secret.
func (s *sink) expect(path, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets[path] = secret
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	buf := s.bufs.Get().(*bytes.Buffer)
	defer s.bufs.Put(buf)
	buf.Reset()
	if _, err := io.Copy(buf, io.LimitReader(r.Body, 1<<20)); err != nil {
		s.bad.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	secret, known := s.secrets[r.URL.Path]
	s.mu.Unlock()
	if !known || !proto.Verify(secret, buf.Bytes(), r.Header.Get(proto.HeaderSignature)) {
		s.bad.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if held := s.held.Load(); held != nil {
		select {
		case <-*held:
		case <-r.Context().Done():
			return
		}
	}
	rc := receipt{eventID: r.Header.Get(proto.HeaderEventID), path: r.URL.Path, at: time.Now()}
	if s.delay > 0 {
		t := time.NewTimer(s.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	s.mu.Lock()
	s.got = append(s.got, rc)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// hold keeps every request that arrives from now on unanswered until
// release.
func (s *sink) hold() {
	ch := make(chan struct{})
	s.held.CompareAndSwap(nil, &ch)
}

// release lets the held requests go on to be answered; it may be called
// when nothing is held.
func (s *sink) release() {
	if held := s.held.Swap(nil); held != nil {
		close(*held)
	}
}

// accepted is how many requests were answered 200 so far.
func (s *sink) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// receipts returns the accepted requests, each (event, path) once.
func (s *sink) receipts() []receipt {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[[2]string]bool, len(s.got))
	out := make([]receipt, 0, len(s.got))
	for _, r := range s.got {
		k := [2]string{r.eventID, r.path}
		if !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}
