package receiver

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// Behaviour decides the status an endpoint answers with. attempt is how many
// times this event id has reached the endpoint, counting this request (1-based).
type Behaviour func(attempt int) int

// Healthy always answers 200.
func Healthy() Behaviour { return func(int) int { return http.StatusOK } }

// FailFirst answers 503 to the first n requests of each event, then 200.
func FailFirst(n int) Behaviour {
	return func(attempt int) int {
		if attempt <= n {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
}

// DownThenUp answers 503 to the first n requests it gets (whatever their
// event), then 200: an endpoint that is down for a while and recovers.
func DownThenUp(n int) Behaviour {
	var seen atomic.Int64
	return func(int) int {
		if seen.Add(1) <= int64(n) {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
}

// Always answers status to every request.
func Always(status int) Behaviour { return func(int) int { return status } }

// Delivery is one request an endpoint received.
type Delivery struct {
	EventID     string
	EventType   string
	Body        []byte
	Header      http.Header
	SignatureOK bool // signature present and valid for the endpoint's secret
	Signed      bool // a signature header was present
	Status      int  // what the endpoint answered
	At          time.Time
}

// Endpoint is one receiving URL path with its own secret and behaviour.
type Endpoint struct {
	mu        sync.Mutex
	secret    string
	behaviour Behaviour
	seen      map[string]int // event id → requests
	log       []Delivery
	notify    chan struct{}
}

// Stats summarises what an endpoint saw.
type Stats struct {
	Requests   int // every request
	Accepted   int // requests answered 2xx
	Unique     int // distinct event ids accepted (after dedup)
	Duplicates int // 2xx requests for an event id already accepted
	BadSig     int // requests whose signature did not verify
}

// Receiver routes paths to endpoints.
type Receiver struct {
	mu        sync.Mutex
	endpoints map[string]*Endpoint
}

// New returns an empty receiver; add endpoints with Handle.
func New() *Receiver { return &Receiver{endpoints: make(map[string]*Endpoint)} }

// Handle registers an endpoint at path. secret "" means deliveries are
// expected unsigned.
func (r *Receiver) Handle(path, secret string, b Behaviour) *Endpoint {
	ep := &Endpoint{secret: secret, behaviour: b, seen: make(map[string]int), notify: make(chan struct{}, 1)}
	r.mu.Lock()
	r.endpoints[path] = ep
	r.mu.Unlock()
	return ep
}

// ServeHTTP implements http.Handler.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	ep := r.endpoints[req.URL.Path]
	r.mu.Unlock()
	if ep == nil {
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	sig := req.Header.Get(proto.HeaderSignature)
	d := Delivery{
		EventID:   req.Header.Get(proto.HeaderEventID),
		EventType: req.Header.Get(proto.HeaderEventType),
		Body:      body,
		Header:    req.Header.Clone(),
		Signed:    sig != "",
		At:        time.Now(),
	}
	d.SignatureOK = d.Signed && ep.secret != "" && proto.Verify(ep.secret, body, sig)
	ep.mu.Lock()
	ep.seen[d.EventID]++
	status := ep.behaviour(ep.seen[d.EventID])
	if ep.secret != "" && !d.SignatureOK {
		status = http.StatusUnauthorized
	}
	d.Status = status
	ep.log = append(ep.log, d)
	ep.mu.Unlock()
	select {
	case ep.notify <- struct{}{}:
	default:
	}
	w.WriteHeader(status)
}

// Deliveries returns a copy of every request the endpoint received.
func (ep *Endpoint) Deliveries() []Delivery {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]Delivery(nil), ep.log...)
}

// Stats summarises the endpoint's requests.
func (ep *Endpoint) Stats() Stats {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var s Stats
	accepted := make(map[string]bool)
	for _, d := range ep.log {
		s.Requests++
		if d.Signed && !d.SignatureOK {
			s.BadSig++
		}
		if d.Status >= 200 && d.Status < 300 {
			s.Accepted++
			if accepted[d.EventID] {
				s.Duplicates++
			}
			accepted[d.EventID] = true
		}
	}
	s.Unique = len(accepted)
	return s
}

// Notify returns a channel that receives after requests arrive (coalesced),
// for waiting on an endpoint without sleeping.
func (ep *Endpoint) Notify() <-chan struct{} { return ep.notify }
