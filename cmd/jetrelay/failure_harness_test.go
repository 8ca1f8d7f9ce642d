package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/redisproc"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// Load shape shared by the failure scenarios: every event matches
// loadSubscriptions subscriptions, so each emit enqueues that many
// deliveries, as admin's fan-out does.
const (
	loadSubscriptions = 4
	loadWorkers       = 16
	loadAckWait       = "3s"
)

// loadBed is a bed for the failure scenarios: a real redis-server (with AOF
// when asked), a receiver with several healthy, verifying endpoints, and a
// NATS URL that each scenario supplies (empty: the embedded server).
type loadBed struct {
	*bed
	natsURL string
	eps     []*receiver.Endpoint
}

// newLoadBed builds the bed and creates loadSubscriptions subscriptions the
// way admin does, each on its own receiver path with its own secret.
func newLoadBed(t *testing.T, redisOpts redisproc.Options) *loadBed {
	t.Helper()
	b := &bed{redis: testenv.Redis(t, redisOpts), recv: receiver.New(), mux: http.NewServeMux()}
	b.equip(t)

	lb := &loadBed{bed: b}
	for i := range loadSubscriptions {
		_, ep := b.endpoint(t, fmt.Sprintf("/load-%d", i), "budget.exhausted", nil)
		lb.eps = append(lb.eps, ep)
	}
	return lb
}

// relayEnv is the environment of one jetrelay process in a failure
// scenario: short AckWait so unacked work comes back quickly, its own
// bridge id, and extra key/value pairs on top.
func (lb *loadBed) relayEnv(bridgeID string, extra ...string) map[string]string {
	env := map[string]string{
		"REDIS_URL":                     lb.redis.Server.URL(),
		"WEBHOOK_SECRET_ENCRYPTION_KEY": lb.keyB64,
		"JETRELAY_BRIDGE_ID":            bridgeID,
		"JETRELAY_WORKERS":              strconv.Itoa(loadWorkers),
		"JETRELAY_ACK_WAIT":             loadAckWait,
	}
	if lb.natsURL != "" {
		env["NATS_URL"] = lb.natsURL
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// accepted sums the receiver's statistics over every load endpoint.
func (lb *loadBed) accepted() receiver.Stats {
	var sum receiver.Stats
	for _, ep := range lb.eps {
		s := ep.Stats()
		sum.Requests += s.Requests
		sum.Accepted += s.Accepted
		sum.Unique += s.Unique
		sum.Duplicates += s.Duplicates
		sum.BadSig += s.BadSig
	}
	return sum
}

// awaitProgress waits until the receiver has accepted n distinct events, so
// a failure is injected while work is flowing, not before it starts.
func (lb *loadBed) awaitProgress(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for lb.accepted().Unique < n {
		if time.Now().After(deadline) {
			t.Fatalf("receiver accepted %d distinct events, want %d within %s", lb.accepted().Unique, n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// loadWriter emits events as admin does, at a steady pace, until it has
// enqueued its target number of deliveries. An emit that fails (Redis
// down) is counted and the next one is tried after a short pause: admin's
// own emits fail the same way, and whatever such an emit did write is
// found by the final scan of delivery:* records.
type loadWriter struct {
	done chan struct{}

	mu      sync.Mutex
	ids     []string
	failed  int
	lastErr error
}

func (lb *loadBed) startLoad(target int, pace time.Duration) *loadWriter {
	w := &loadWriter{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(pace)
		defer tick.Stop()
		for w.count() < target {
			<-tick.C
			// Never cancelled mid-flight, so every id admin wrote is returned.
			_, ids, err := lb.writer.Emit(context.Background(), event("budget.exhausted"), admin.TraceSnapshot{})
			w.mu.Lock()
			w.ids = append(w.ids, ids...)
			if err != nil {
				w.failed++
				w.lastErr = err
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *loadWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}

// wait waits for the writer to reach its target and returns the ids it
// enqueued and how many emits failed.
func (w *loadWriter) wait(t *testing.T, within time.Duration) ([]string, int) {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(within):
		t.Fatalf("load writer enqueued %d deliveries in %s and is still going", w.count(), within)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed > 0 {
		t.Logf("load writer: %d emits failed (last: %v)", w.failed, w.lastErr)
	}
	return slices.Clone(w.ids), w.failed
}

// deliveryIDs is every delivery record in Redis: the writer's ids plus any
// an emit wrote before it failed.
func (lb *loadBed) deliveryIDs(ctx context.Context, known []string) ([]string, error) {
	seen := make(map[string]bool, len(known))
	all := slices.Clone(known)
	for _, id := range known {
		seen[id] = true
	}
	iter := lb.redis.Client.Scan(ctx, 0, "delivery:*", 1000).Iterator()
	for iter.Next(ctx) {
		id := strings.TrimPrefix(iter.Val(), "delivery:")
		if !seen[id] {
			seen[id] = true
			all = append(all, id)
		}
	}
	return all, iter.Err()
}

// deliveryStatuses reads the status of each delivery in one pipeline; a
// missing or unreadable record shows as a description of the problem.
func (lb *loadBed) deliveryStatuses(ctx context.Context, ids []string) (map[string]proto.DeliveryStatus, error) {
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := lb.redis.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Get(ctx, "delivery:"+id)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make(map[string]proto.DeliveryStatus, len(ids))
	for i, id := range ids {
		raw, err := cmds[i].Bytes()
		if errors.Is(err, redis.Nil) {
			out[id] = "missing"
			continue
		}
		d, err := proto.ParseDelivery(raw)
		if err != nil {
			out[id] = proto.DeliveryStatus("unreadable: " + err.Error())
			continue
		}
		out[id] = d.Status
	}
	return out, nil
}

// awaitAllSuccess waits until every delivery record in Redis (and every id
// the writer enqueued) is SUCCESS. A FAILED delivery fails the test at
// once: against healthy receivers nothing may fail, least of all because
// infrastructure was down. It returns every delivery id.
func (lb *loadBed) awaitAllSuccess(t *testing.T, known []string, within time.Duration) []string {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for {
		all, err := lb.deliveryIDs(ctx, known)
		if err != nil {
			t.Fatalf("scan delivery records: %v", err)
		}
		st, err := lb.deliveryStatuses(ctx, all)
		if err != nil {
			t.Fatalf("read delivery records: %v", err)
		}
		left := map[string]proto.DeliveryStatus{}
		failed := map[string]proto.DeliveryStatus{}
		for id, s := range st {
			switch s {
			case proto.DeliverySuccess:
			case proto.DeliveryFailed:
				failed[id] = s
			default:
				left[id] = s
			}
		}
		if len(failed) > 0 {
			t.Fatalf("%d of %d deliveries FAILED against healthy receivers: %v", len(failed), len(all), lb.describe(ctx, failed, 3))
		}
		if len(left) == 0 {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries not SUCCESS after %s (queues: %s): %v",
				len(left), len(all), within, lb.queueDepths(ctx), lb.describe(ctx, left, 5))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// describe shows up to n delivery records in full, for a failure message.
func (lb *loadBed) describe(ctx context.Context, m map[string]proto.DeliveryStatus, n int) string {
	var parts []string
	for id, s := range m {
		if len(parts) == n {
			parts = append(parts, fmt.Sprintf("… and %d more", len(m)-n))
			break
		}
		raw, _ := lb.redis.Client.Get(ctx, "delivery:"+id).Result()
		parts = append(parts, fmt.Sprintf("%s=%s %s", id, s, raw))
	}
	return strings.Join(parts, "\n")
}

// queueDepths reports the Redis dispatch lists that hold ids.
func (lb *loadBed) queueDepths(ctx context.Context) string {
	keys, _ := lb.redis.Client.Keys(ctx, "dispatch:*").Result()
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		if n, err := lb.redis.Client.LLen(ctx, k).Result(); err == nil {
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
	}
	return strings.Join(parts, " ")
}

// verifyReceived checks that the receiver accepted every delivery exactly
// once after deduplication, correctly signed, and that duplicate sends stay
// within maxDup (what was in flight when the failure hit). It logs the
// scenario's numbers.
func (lb *loadBed) verifyReceived(t *testing.T, scenario string, all []string, started time.Time, maxDup int) {
	t.Helper()
	st := lb.accepted()
	t.Logf("%s: %d deliveries all SUCCESS in %s; receiver: %d requests, %d unique, %d duplicate sends (bound %d), %d bad signatures",
		scenario, len(all), time.Since(started).Round(time.Millisecond), st.Requests, st.Unique, st.Duplicates, maxDup, st.BadSig)
	if st.Unique != len(all) || st.BadSig != 0 {
		t.Errorf("receiver accepted %d distinct events (%d bad signatures), want all %d deliveries, correctly signed",
			st.Unique, st.BadSig, len(all))
	}
	if st.Duplicates > maxDup {
		t.Errorf("receiver saw %d duplicate sends, want at most %d (what was in flight when the failure hit)", st.Duplicates, maxDup)
	}
}
