package engine_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

func TestCluster_ScheduledRetriesAndHeldDeliveriesSurviveTheStreamLeaderStopping(t *testing.T) {
	t.Parallel()
	cl := testenv.Cluster(t, 3)
	// Each event's first send fails: every delivery then waits for its
	// retry as a JetStream wake-up (3 s, above ParkAfter).
	var mu sync.Mutex
	got := map[string]int{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Cycles-Event-Id")
		mu.Lock()
		got[id]++
		n := got[id]
		mu.Unlock()
		if n == 1 && r.URL.Path == "/custom/retry" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e := newEnv(t, envOptions{handler: h, natsURLs: cl.ClientURLs(), streamReplicas: 3, ackWait: 10 * time.Second,
		// The first failures are on purpose: keep the breaker out of it.
		engine: func(c *engine.Config) { c.Breaker.Threshold = 1000 }})
	ctx := context.Background()
	retrying, _, _ := e.subscribe(t, "/custom/retry", nil, func(s *admin.Subscription) {
		s.RetryPolicy = &proto.RetryPolicy{MaxRetries: ptr(3), InitialDelayMs: ptr(int64(8000)), BackoffMultiplier: ptr(1.0), MaxDelayMs: ptr(int64(8000))}
	})
	paused, _, _ := e.subscribe(t, "/custom/paused", nil, func(s *admin.Subscription) { s.Status = proto.SubscriptionPaused })
	var scheduled, held []string
	for range 20 {
		scheduled = append(scheduled, e.deliver(t, retrying, e.event(), nil))
	}
	for range 5 {
		held = append(held, e.deliver(t, paused, e.event(), nil))
	}
	// The records say so once the wake-up or held copy is stored (the
	// work item is acked only after both).
	waitFor(t, 60*time.Second, "every delivery scheduled for its retry or held", func() bool {
		for _, id := range scheduled {
			rec, err := e.store.Delivery(ctx, id)
			if err != nil || rec.Status != proto.DeliveryRetrying || rec.NextRetryAt == nil {
				return false
			}
		}
		for _, id := range held {
			rec, err := e.store.Delivery(ctx, id)
			if err != nil || rec.Waiting == nil || *rec.Waiting != "subscription_paused" {
				return false
			}
		}
		return true
	})
	w, err := queue.CountWaiting(ctx, e.js, e.qc)
	if err != nil {
		t.Fatal(err)
	}
	if w.Held != uint64(len(held)) || w.Scheduled == 0 {
		t.Fatalf("before the leader stops JetStream holds %+v, want %d held and the retries scheduled", w, len(held))
	}
	leader := clusterStreamLeader(t, e.js, e.qc.Stream)
	if err := cl.Stop(leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped %s, the stream leader, with %d wake-ups and %d held deliveries pending", leader, w.Scheduled, w.Held)
	if err := e.admin.SetStatus(ctx, paused, proto.SubscriptionActive); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(scheduled, held...) {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Errorf("%s ended %s after the leader stopped, want SUCCESS: %s", id, rec.Status, rec.Raw)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(scheduled)+len(held) {
		t.Errorf("receiver saw %d distinct events, want %d", len(got), len(scheduled)+len(held))
	}
	extra := 0
	for _, n := range got {
		extra += max(0, n-2) // a retried event is sent twice; more is a duplicate
	}
	if extra > 2 {
		t.Errorf("%d duplicate sends beyond at-least-once after one leader loss", extra)
	}
}

// clusterStreamLeader names the stream's current leader.
func clusterStreamLeader(t *testing.T, js jetstream.JetStream, stream string) string {
	t.Helper()
	var leader string
	waitFor(t, 15*time.Second, "the stream to name a leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		if err != nil || info.Cluster == nil {
			return false
		}
		leader = info.Cluster.Leader
		return leader != ""
	})
	return leader
}
