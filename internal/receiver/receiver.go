package receiver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// maxBody bounds a request body the receiver reads.
const maxBody = 4 << 20

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
	verifier  *receive.Verifier // nil: deliveries are expected unsigned
	dedupe    *receive.Deduper
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

// Handle registers an endpoint at path. A blank secret means deliveries are
// expected unsigned, as the sender sends them.
func (r *Receiver) Handle(path, secret string, b Behaviour) *Endpoint {
	ep := &Endpoint{behaviour: b, seen: make(map[string]int), notify: make(chan struct{}, 1),
		dedupe: receive.NewDeduper(receive.NewMemoryStore(0))}
	if proto.SecretUsable(secret) {
		// NewVerifier refuses only blank secrets, which SecretUsable excluded.
		ep.verifier, _ = receive.NewVerifier([]string{secret})
	}
	r.mu.Lock()
	r.endpoints[path] = ep
	r.mu.Unlock()
	return ep
}

// ServeHTTP implements http.Handler. Verification and deduplication are
// transport/receive's, as a real receiver would use them: a wrong signature
// is answered 401, and a delivery of an event already accepted 200 without
// consulting the behaviour again.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	ep := r.endpoints[req.URL.Path]
	r.mu.Unlock()
	if ep == nil {
		http.NotFound(w, req)
		return
	}
	body, status := receive.ReadBody(w, req, maxBody)
	if status != 0 {
		http.Error(w, http.StatusText(status), status)
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
	d.SignatureOK = d.Signed && ep.verifier != nil && ep.verifier.Verify(body, sig) == nil
	switch {
	case ep.verifier != nil && !d.SignatureOK:
		d.Status = http.StatusUnauthorized
	default:
		d.Status = ep.answer(req.Context(), d.EventID)
	}
	ep.mu.Lock()
	ep.log = append(ep.log, d)
	ep.mu.Unlock()
	select {
	case ep.notify <- struct{}{}:
	default:
	}
	w.WriteHeader(d.Status)
}

// answer runs the behaviour once per accepted event: a duplicate of an
// accepted event is 200, a concurrent one 503 (retry later).
func (ep *Endpoint) answer(ctx context.Context, eventID string) int {
	status := 0
	outcome, err := ep.dedupe.Do(ctx, eventID, func(context.Context) error {
		ep.mu.Lock()
		ep.seen[eventID]++
		status = ep.behaviour(ep.seen[eventID])
		ep.mu.Unlock()
		if status < 200 || status > 299 {
			return errRefused
		}
		return nil
	})
	switch {
	case outcome == receive.Duplicate:
		return http.StatusOK
	case outcome == receive.Busy:
		return http.StatusServiceUnavailable
	case errors.Is(err, receive.ErrNoEventID):
		return http.StatusBadRequest
	}
	return status
}

// errRefused tells the deduper the behaviour refused the event, so its
// claim is released and the sender's retry is consulted again.
var errRefused = errors.New("receiver: behaviour refused the event")

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
