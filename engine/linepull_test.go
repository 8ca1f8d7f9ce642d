package engine_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/proto"
)

// holdingEndpoint answers 200 once released; entered receives a value per
// request that reached it. It is its own server: internal/receiver holds
// one mutex across its endpoints, so a blocked request there would block
// every other endpoint too.
type holdingEndpoint struct {
	url     string
	entered chan struct{}
	release func()
}

func newHoldingEndpoint(t *testing.T) *holdingEndpoint {
	released := make(chan struct{})
	var once sync.Once
	h := &holdingEndpoint{entered: make(chan struct{}, 16), release: func() { once.Do(func() { close(released) }) }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.entered <- struct{}{}
		select {
		case <-released:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(h.release) // runs first: srv.Close waits for the handler
	h.url = srv.URL
	return h
}

// A line's loop that waits in work.put for longer than a pull expiry (every
// worker busy, the lane full) has a pull open at the server: its idle
// heartbeat and its 408 expiry arrive while nothing reads the iterator, and
// must fit in the iterator's buffer (engine/ordered.go pullLine). Once a
// worker is free, the line sends its queue at once, in order, and nothing
// was dropped on the engine's connection.
func TestOrdered_ALineKeepsMovingAfterEveryWorkerWasBusyForLongerThanAPullExpiry(t *testing.T) {
	var mu sync.Mutex
	var natsErrs []error
	e := newEnv(t, envOptions{ordering: proto.OrderingStrict, timeout: time.Minute, engine: func(c *engine.Config) {
		c.Workers, c.MinWorkers = 1, 1
	}})
	e.nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		natsErrs = append(natsErrs, err)
		mu.Unlock()
	})
	slow := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, err := range natsErrs {
			if errors.Is(err, nats.ErrSlowConsumer) {
				n++
			}
		}
		return n
	}
	hold := newHoldingEndpoint(t)
	busy, _, _ := e.subscribe(t, "/busy", receiver.Healthy(), func(s *admin.Subscription) { s.URL = hold.url })
	sub, _, ep := e.subscribe(t, "/line", receiver.Healthy(), nil)

	// The one worker is held by another subscription's delivery.
	busyID := e.deliver(t, busy, e.event(), nil)
	<-hold.entered
	// Another line's head fills the one-item lane.
	other, _, _ := e.subscribe(t, "/other", receiver.Healthy(), nil)
	e.deliver(t, other, e.event(), nil)
	waitFor(t, 10*time.Second, "the other line's head to be out", func() bool {
		c, err := e.js.Consumer(context.Background(), e.qc.Stream, e.qc.OrderedConsumerName(other))
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumAckPending == 1
	})
	var events, ids []string
	for range 5 {
		id := e.deliver(t, sub, e.event(), nil)
		d, err := e.store.Delivery(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		events, ids = append(events, d.EventID), append(ids, id)
	}
	// The line's head has been handed out to this replica and waits for
	// a worker.
	waitFor(t, 10*time.Second, "the line's head to be out", func() bool {
		c, err := e.js.Consumer(context.Background(), e.qc.Stream, e.qc.OrderedConsumerName(sub))
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.NumAckPending == 1
	})
	// Every worker stays busy past a pull expiry: the duration is the
	// condition under test, not a stand-in for an event.
	time.Sleep(queue.OrderedPullExpiry + queue.OrderedPullExpiry/2)
	released := time.Now()
	hold.release()
	if rec := e.final(t, busyID); rec.Status != proto.DeliverySuccess {
		t.Fatalf("busy delivery is %s", rec.Status)
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("delivery %s is %s, want SUCCESS", id, rec.Status)
		}
	}
	took := time.Since(released)
	t.Logf("line of %d sent %s after the worker was freed; %d slow-consumer errors; nats errors %v", len(ids), took, slow(), natsErrs)
	if n := slow(); n > 0 {
		t.Errorf("%d slow-consumer errors on the engine's connection", n)
	}
	if took > queue.OrderedPullExpiry {
		t.Errorf("the line took %s to send %d deliveries once a worker was free, want well under a pull expiry (%s)", took, len(ids), queue.OrderedPullExpiry)
	}
	if got := receivedOrder(ep); !slices.Equal(got, events) {
		t.Errorf("received in the order %v, want the enqueue order %v", got, events)
	}
}
