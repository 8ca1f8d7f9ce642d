package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jetrelay/jetrelay/transport"
)

// memq is a complete minimal transport: memq://<queue> URLs append the
// event to an in-process queue. A real plugin talks to its destination
// instead, and classifies what it answers the same way.
type memq struct {
	mu     sync.Mutex
	queues map[string][]string // queue → event ids
	limit  int                 // a full queue throttles
}

func (m *memq) Deliver(ctx context.Context, req *transport.Request) (transport.Result, error) {
	u, err := url.Parse(req.URL)
	if err != nil || u.Scheme != "memq" || u.Host == "" {
		// No retry can fix the URL; never quote it (it may hold a password).
		return transport.Result{}, transport.Permanent(errors.New("memq: URL must be memq://<queue>"))
	}
	if strings.ContainsAny(req.EventID, "\r\n") {
		return transport.Result{}, transport.Permanent(errors.New("memq: event id contains CR or LF"))
	}
	if err := ctx.Err(); err != nil {
		return transport.Result{}, err // no answer: retryable
	}
	start := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queues[u.Host]) >= m.limit {
		// The destination answered "slow down": a Result, not an error.
		return transport.Result{Outcome: transport.Throttled, RetryAfter: time.Second, Message: "memq: queue full", Latency: time.Since(start)}, nil
	}
	m.queues[u.Host] = append(m.queues[u.Host], req.EventID)
	return transport.Result{Outcome: transport.Delivered, Latency: time.Since(start)}, nil
}

// A plugin registers a Driver for its scheme from init; the host opens every
// registered driver into the Registry the engine uses, and the engine picks
// the transport by the subscription URL's scheme.
func Example() {
	// In the plugin's package: func init() { transport.Register("memq", …) }
	transport.Register("memq", transport.DriverFunc(func(_ context.Context, env transport.Env) (transport.Transport, error) {
		return &memq{queues: map[string][]string{}, limit: 1}, nil
	}))

	// In the host (jetrelay run does this at start-up).
	reg, err := transport.OpenRegistry(context.Background(), transport.Env{})
	if err != nil {
		panic(err)
	}
	defer reg.Close()

	for _, id := range []string{"evt_1", "evt_2"} {
		tr, err := reg.Lookup("memq://orders")
		if err != nil {
			panic(err)
		}
		res, err := tr.Deliver(context.Background(), &transport.Request{URL: "memq://orders", EventID: id, EventType: "budget.exhausted"})
		class, wait := transport.Classify(res, err)
		fmt.Println(id, res.Outcome, class, wait)
	}
	_, err = reg.Lookup("smtp://mail.example.com")
	fmt.Println(errors.Is(err, transport.ErrUnsupportedScheme), errors.Is(err, transport.ErrPermanent))
	// Output:
	// evt_1 delivered accepted 0s
	// evt_2 throttled throttled 1s
	// true true
}
