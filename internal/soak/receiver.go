package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// Mode is how a soak endpoint answers for a while.
type Mode int32

// Endpoint modes, drawn from the seed per period.
const (
	ModeHealthy   Mode = iota // 200 at once
	Mode500                   // 500
	Mode503                   // 503
	ModeSlow                  // half within a second (200), half after the sender's timeout
	ModeBlackhole             // takes the connection and never answers
)

var modeNames = [...]string{"healthy", "500", "503", "slow", "black-hole"}

func (m Mode) String() string { return modeNames[m] }

// httpTimeout is JETRELAY_HTTP_REQUEST_TIMEOUT of every soak process; slow
// answers stay clear of it on either side so a receipt the sender did not
// see cannot happen by a hair.
const httpTimeout = 2 * time.Second

// endpoint is one subscription's receiving path.
type endpoint struct {
	path     string
	subID    string
	verifier *receive.Verifier
	mode     atomic.Int32
}

// span is one request's lifetime at the receiver.
type span struct{ start, end time.Time }

// receivers is a real HTTP server on loopback serving every soak endpoint.
// It verifies X-Cycles-Signature with transport/receive and records each
// signed 2xx it answered to a sender that was still there.
type receivers struct {
	srv  *http.Server
	base string

	mu       sync.Mutex
	eps      map[string]*endpoint
	receipts map[string]int // subscription id + " " + event id → 2xx answered
	spans    []span
	requests int
	badSig   int
	holding  sync.WaitGroup // black-holed connections
	closing  chan struct{}
}

func startReceivers() (*receivers, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receivers{eps: map[string]*endpoint{}, receipts: map[string]int{}, closing: make(chan struct{}),
		base: "http://" + ln.Addr().String()}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *receivers) close() {
	close(r.closing)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.srv.Shutdown(ctx)
	r.holding.Wait()
}

// add serves a subscription at path, verifying with its secret.
func (r *receivers) add(path, subID, secret string) (*endpoint, error) {
	v, err := receive.NewVerifier([]string{secret})
	if err != nil {
		return nil, err
	}
	ep := &endpoint{path: path, subID: subID, verifier: v}
	r.mu.Lock()
	r.eps[path] = ep
	r.mu.Unlock()
	return ep, nil
}

func receiptKey(subID, eventID string) string { return subID + " " + eventID }

func (r *receivers) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	ep := r.eps[req.URL.Path]
	r.mu.Unlock()
	if ep == nil {
		http.NotFound(w, req)
		return
	}
	sp := span{start: time.Now()}
	defer func() {
		sp.end = time.Now()
		r.mu.Lock()
		r.spans = append(r.spans, sp)
		r.mu.Unlock()
	}()
	body, status := receive.ReadBody(w, req, 4<<20)
	r.mu.Lock()
	r.requests++
	r.mu.Unlock()
	if status != 0 {
		http.Error(w, http.StatusText(status), status)
		return
	}
	if err := ep.verifier.Verify(body, req.Header.Get(proto.HeaderSignature)); err != nil {
		r.mu.Lock()
		r.badSig++
		r.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	eventID := req.Header.Get(proto.HeaderEventID)
	switch Mode(ep.mode.Load()) {
	case Mode500:
		w.WriteHeader(http.StatusInternalServerError)
		return
	case Mode503:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case ModeSlow:
		wait := 200*time.Millisecond + rand.N(800*time.Millisecond)
		if rand.N(2) == 0 {
			wait = httpTimeout + time.Second + rand.N(2*time.Second)
		}
		select {
		case <-time.After(wait):
		case <-req.Context().Done():
			return
		}
	case ModeBlackhole:
		r.blackhole(w, req)
		return
	}
	r.accept(w, req, ep.subID, eventID)
}

// accept answers 200 and counts the receipt, unless the sender already
// gave up (a killed process, a timeout): that answer never reaches it.
func (r *receivers) accept(w http.ResponseWriter, req *http.Request, subID, eventID string) {
	if req.Context().Err() != nil {
		return
	}
	r.mu.Lock()
	r.receipts[receiptKey(subID, eventID)]++
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// blackhole takes the connection over and never answers, until the sender
// hangs up (its timeout) or the soak ends.
func (r *receivers) blackhole(w http.ResponseWriter, req *http.Request) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		<-req.Context().Done()
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	r.holding.Add(1)
	defer r.holding.Done()
	defer conn.Close()
	gone := make(chan struct{})
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := conn.Read(buf); err != nil {
				close(gone)
				return
			}
		}
	}()
	select {
	case <-gone:
	case <-r.closing:
	case <-time.After(time.Minute):
	}
}

// setAll puts every endpoint into m.
func (r *receivers) setAll(m Mode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ep := range r.eps {
		ep.mode.Store(int32(m))
	}
}

// receipt reports how many signed 2xx the receiver answered for one
// delivery (a subscription's copy of an event).
func (r *receivers) receipt(subID, eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.receipts[receiptKey(subID, eventID)]
}

// duplicates is the number of 2xx answered beyond the first, per delivery.
func (r *receivers) duplicates() (dups, receipts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.receipts {
		receipts += n
		dups += n - 1
	}
	return dups, receipts
}

// exposed counts the requests alive at some point of [from, to]: the sends
// a fault in that window could cut off after the receiver answered, the
// only way a duplicate 2xx can arise.
func (r *receivers) exposed(from, to time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.spans {
		if !s.start.After(to) && !s.end.Before(from) {
			n++
		}
	}
	return n
}

func (r *receivers) stats() (requests, badSig int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, r.badSig
}

func (e *endpoint) String() string { return fmt.Sprintf("%s (%s)", e.path, e.subID) }
