package engine_test

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// receivedOrder is the event ids of ep's first successful receipts.
func receivedOrder(ep *receiver.Endpoint) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range ep.Deliveries() {
		if d.Status/100 == 2 && !seen[d.EventID] {
			seen[d.EventID] = true
			out = append(out, d.EventID)
		}
	}
	return out
}

func TestOrdered_APausedStrictSubscriptionSendsItsLineInOrderOnceActiveAgain(t *testing.T) {
	e := newEnv(t, envOptions{ordering: proto.OrderingStrict})
	ctx := context.Background()
	sub, _, ep := e.subscribe(t, "/paused-line", receiver.Healthy(), nil)
	if err := e.admin.SetStatus(ctx, sub, proto.SubscriptionPaused); err != nil {
		t.Fatal(err)
	}
	var events, ids []string
	for range 40 {
		ev := e.event()
		id := e.deliver(t, sub, ev, nil)
		d, err := e.store.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		events, ids = append(events, d.EventID), append(ids, id)
	}
	// The head of the line has been seen and is waiting for the
	// subscription, not sent.
	waitFor(t, 10*time.Second, "the first delivery to wait for its paused subscription", func() bool {
		return slices.Contains([]string{"subscription_paused"}, waiting(t, e, ids[0]))
	})
	if n := ep.Stats().Requests; n != 0 {
		t.Fatalf("%d requests reached a paused subscription's receiver", n)
	}
	if err := e.admin.SetStatus(ctx, sub, proto.SubscriptionActive); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("delivery %s is %s, want SUCCESS: %s", id, rec.Status, e.rawDelivery(t, id))
		}
	}
	if got := receivedOrder(ep); !slices.Equal(got, events) {
		t.Errorf("received after the pause in the order %v, want the enqueue order %v", got, events)
	}
}

func TestOrdered_StrictRetriesHoldTheLineAndFirstAttemptRetriesLeaveIt(t *testing.T) {
	for _, mode := range []proto.Ordering{proto.OrderingStrict, proto.OrderingFirstAttempt} {
		t.Run(string(mode), func(t *testing.T) {
			// Ten refusals in a row would open the breaker, which is not
			// what this test is about.
			e := newEnv(t, envOptions{ordering: mode, engine: func(c *engine.Config) { c.Breaker.Threshold = 100 }})
			// Every event's first request is refused, its retry accepted:
			// after 100 ms (strict), or after a second (first-attempt: long
			// enough for every first send to go out before any retry).
			sub, _, ep := e.subscribe(t, "/retry-line", receiver.FailFirst(1), func(s *admin.Subscription) {
				if mode == proto.OrderingFirstAttempt {
					s.RetryPolicy.InitialDelayMs = ptr(int64(1000))
				}
			})
			var events, ids []string
			for range 10 {
				id := e.deliver(t, sub, e.event(), nil)
				d, err := e.store.Delivery(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				events, ids = append(events, d.EventID), append(ids, id)
			}
			for _, id := range ids {
				if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
					t.Fatalf("delivery %s is %s, want SUCCESS: %s", id, rec.Status, e.rawDelivery(t, id))
				}
			}
			var firsts []string
			seen := map[string]bool{}
			for _, d := range ep.Deliveries() {
				if !seen[d.EventID] {
					seen[d.EventID] = true
					firsts = append(firsts, d.EventID)
				}
			}
			if !slices.Equal(firsts, events) {
				t.Errorf("first attempts in the order %v, want %v", firsts, events)
			}
			got := receivedOrder(ep)
			switch mode {
			case proto.OrderingStrict:
				// Each retry (100 ms) goes out before the next delivery's first send.
				if !slices.Equal(got, events) {
					t.Errorf("strict: successes in the order %v, want %v", got, events)
				}
			case proto.OrderingFirstAttempt:
				// The retries left the line: every first send went out
				// before the first retry's success.
				log := ep.Deliveries()
				firstOK := slices.IndexFunc(log, func(d receiver.Delivery) bool { return d.Status/100 == 2 })
				if n := len(seenBefore(log[:firstOK])); n != len(events) {
					t.Errorf("first-attempt: %d of %d first sends before the first success; the retries held the line (%v)", n, len(events), got)
				}
			}
		})
	}
}

// seenBefore is the distinct events of log.
func seenBefore(log []receiver.Delivery) map[string]bool {
	out := map[string]bool{}
	for _, d := range log {
		out[d.EventID] = true
	}
	return out
}

// waiting is the delivery record's jetrelay_waiting (why it waits).
func waiting(t *testing.T, e *env, id string) string {
	t.Helper()
	raw := e.rawDelivery(t, id)
	var v struct {
		Waiting string `json:"jetrelay_waiting"`
	}
	_ = json.Unmarshal([]byte(raw), &v)
	return v.Waiting
}

func TestOrdered_AStrictLineKeepsItsOrderThroughTheStreamLeaderStopping(t *testing.T) {
	t.Parallel()
	cl := testenv.Cluster(t, 3)
	e := newEnv(t, envOptions{ordering: proto.OrderingStrict, natsURLs: cl.ClientURLs(), streamReplicas: 3})
	// One request in four refused, so retries hold the line now and then.
	var n atomic.Int64
	sub, _, ep := e.subscribe(t, "/leader-line", func(int) int {
		if n.Add(1)%4 == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}, nil)
	const total = 150
	ids, events := e.queueLine(t, sub, total)
	waitFor(t, 60*time.Second, "a third of the line delivered", func() bool { return ep.Stats().Unique >= total/3 })
	leader := clusterStreamLeader(t, e.js, e.qc.Stream)
	if err := cl.Stop(leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped %s, the stream leader, at %d of %d delivered", leader, ep.Stats().Unique, total)
	assertLineInOrder(t, e, ep, ids, events)
}

// Line consumers keep their state in memory (queue/ordered.go): a
// standalone server that restarts forgets them, and a whole cluster that
// restarts brings them back empty. Either way the line picks up at its
// first unacked item, and its order holds.
func TestOrdered_AStrictLineKeepsItsOrderThroughAStandaloneServerRestartingWithoutItsConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	addr := strings.TrimPrefix(srv.ClientURL(), "nats://")
	e := newEnv(t, envOptions{ordering: proto.OrderingStrict, natsURLs: srv.ClientURL()})
	restartLine(t, e, func() {
		srv.Shutdown()
		if srv, err = natsserver.Start(ctx, natsserver.Options{StoreDir: dir, Listen: addr}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOrdered_AStrictLineKeepsItsOrderThroughTheWholeClusterRestarting(t *testing.T) {
	t.Parallel()
	cl := testenv.Cluster(t, 3)
	e := newEnv(t, envOptions{ordering: proto.OrderingStrict, natsURLs: cl.ClientURLs(), streamReplicas: 3})
	restartLine(t, e, func() {
		for _, name := range cl.Names() {
			if err := cl.Stop(name); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range cl.Names() {
			if err := cl.Restart(name); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// restartLine queues a strict line of 120 deliveries, calls restart while
// the receiver holds the line's 41st request (so most of the line is still
// queued), and checks that every delivery succeeds, first successes in
// enqueue order.
func restartLine(t *testing.T, e *env, restart func()) {
	t.Helper()
	var n atomic.Int64
	held, restarted := make(chan struct{}), make(chan struct{})
	sub, _, ep := e.subscribe(t, "/restart-line", func(int) int {
		if n.Add(1) == 41 {
			close(held)
			<-restarted
		}
		return http.StatusOK
	}, nil)
	const total = 120
	ids, events := e.queueLine(t, sub, total)
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatalf("the line's 41st request never came (%d requests)", n.Load())
	}
	restart()
	close(restarted)
	t.Logf("restarted with %d of %d delivered", ep.Stats().Unique, total)
	assertLineInOrder(t, e, ep, ids, events)
}

// queueLine delivers n new events to sub one after another and returns
// the deliveries and their events in enqueue order.
func (e *env) queueLine(t *testing.T, sub string, n int) (ids, events []string) {
	t.Helper()
	for range n {
		id := e.deliver(t, sub, e.event(), nil)
		d, err := e.store.Delivery(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		events, ids = append(events, d.EventID), append(ids, id)
	}
	return ids, events
}

// assertLineInOrder checks that every delivery of ids ends SUCCESS and that
// ep's first successes are their events in enqueue order.
func assertLineInOrder(t *testing.T, e *env, ep *receiver.Endpoint, ids, events []string) {
	t.Helper()
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("delivery %s is %s, want SUCCESS: %s", id, rec.Status, e.rawDelivery(t, id))
		}
	}
	if got := receivedOrder(ep); !slices.Equal(got, events) {
		idx := map[string]int{}
		for i, ev := range events {
			idx[ev] = i
		}
		var seq []int
		for _, ev := range got {
			seq = append(seq, idx[ev])
		}
		t.Errorf("first successes out of enqueue order (by enqueue index): %v", seq)
	}
	t.Logf("duplicates: %d", ep.Stats().Duplicates)
}

// A strict line whose breaker opened keeps its order: the items behind a
// failed head wait in the line for the breaker, instead of being held apart
// in bulk (a never-sent backlog's usual hold) and released into the shared
// work subject, where they would go out in parallel. The receiver records
// an event when it answers, after a delay that differs per event, so sends
// that run in parallel are recorded out of order.
func TestOrdered_AStrictLineBehindAnOpenBreakerKeepsItsOrder(t *testing.T) {
	var mu sync.Mutex
	var requests int
	var got []string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(proto.HeaderEventID)
		mu.Lock()
		requests++
		down := requests <= 2
		mu.Unlock()
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		time.Sleep(time.Duration(crc32.ChecksumIEEE([]byte(id))%25) * time.Millisecond)
		mu.Lock()
		if !slices.Contains(got, id) {
			got = append(got, id)
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	e := newEnv(t, envOptions{ordering: proto.OrderingStrict, handler: handler, engine: func(c *engine.Config) {
		c.Breaker.Threshold, c.Breaker.OpenFor, c.Breaker.MaxOpenFor = 2, 2*time.Second, 4*time.Second
	}})
	// The head's two sends fail (max_retries 1): it is FAILED and the
	// breaker is open when the next items reach the front of the line.
	sub, _, _ := e.subscribe(t, "/custom/breaker-line", nil, func(s *admin.Subscription) {
		s.RetryPolicy = fastPolicy(1)
	})
	var events, ids []string
	for range 30 {
		id := e.deliver(t, sub, e.event(), nil)
		d, err := e.store.Delivery(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		events, ids = append(events, d.EventID), append(ids, id)
	}
	if rec := e.final(t, ids[0]); rec.Status != proto.DeliveryFailed || rec.Attempts != 2 {
		t.Fatalf("head = %s, want FAILED after its 2 sends", e.rawDelivery(t, ids[0]))
	}
	for _, id := range ids[1:] {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("delivery %s is %s, want SUCCESS: %s", id, rec.Status, e.rawDelivery(t, id))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, events[1:]) {
		t.Errorf("successes after the breaker closed in the order %v, want the enqueue order %v", got, events[1:])
	}
}

func TestOrdered_ALineThatCannotBePulledMakesTheReplicaNotReadyNamingItsSubscription(t *testing.T) {
	e := newEnv(t, envOptions{ordering: proto.OrderingStrict, engine: func(c *engine.Config) { c.LineFailingAfter = 2 * time.Second }})
	ctx := context.Background()
	sub, _, ep := e.subscribe(t, "/limited-line", receiver.Healthy(), nil)
	waitFor(t, 10*time.Second, "the engine to be ready", func() bool { return e.engine.Ready(ctx) == nil })

	// The stream allows no further consumer: the line's cannot be created.
	stream, err := e.js.Stream(ctx, e.qc.Stream)
	if err != nil {
		t.Fatal(err)
	}
	setMaxConsumers := func(n int) {
		t.Helper()
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := info.Config
		cfg.MaxConsumers = n
		if n == 0 {
			cfg.MaxConsumers = info.State.Consumers
		}
		if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	setMaxConsumers(0)
	id := e.deliver(t, sub, e.event(), nil)

	var why error
	waitFor(t, 20*time.Second, "readiness to report the ordered line", func() bool {
		why = e.engine.Ready(ctx)
		return why != nil
	})
	if msg := why.Error(); !strings.Contains(msg, "ordered line") || !strings.Contains(msg, sub) || !strings.Contains(msg, "maximum consumers") {
		t.Errorf("not ready because %q, want the ordered line of %s named with its cause", msg, sub)
	}
	lines := e.engine.FailingLines()
	if len(lines) != 1 || lines[0].SubscriptionID != sub {
		t.Errorf("failing lines %+v, want the one of %s", lines, sub)
	}
	if n := ep.Stats().Requests; n != 0 {
		t.Fatalf("%d requests reached the receiver of a line that cannot be pulled", n)
	}

	setMaxConsumers(-1)
	if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
		t.Fatalf("delivery %s is %s once the line could be pulled, want SUCCESS", id, rec.Status)
	}
	waitFor(t, 10*time.Second, "readiness to come back", func() bool { return e.engine.Ready(ctx) == nil })
}
