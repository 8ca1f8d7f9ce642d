package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

func TestRun_DeliversAdminWrittenEventEndToEnd(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	var methods sync.Map
	subID, ep := b.endpoint(t, "/hook", "budget.exhausted", func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			methods.Store(r.Method, true)
			next.ServeHTTP(w, r)
		})
	})
	stored, err := b.redis.Client.Get(context.Background(), store.SecretKey(subID)).Result()
	if err != nil || !strings.HasPrefix(stored, "enc:") {
		t.Fatalf("admin stored the signing secret as %q (%v), want an enc: value jetrelay must decrypt", stored, err)
	}
	ids := b.emit(t, "budget.exhausted", 1)
	if len(ids) != 1 {
		t.Fatalf("emit enqueued %d deliveries, want 1", len(ids))
	}

	r := startRelay(t, b.env())
	b.awaitSuccess(t, ids, 15*time.Second)

	rec, err := b.store.Delivery(context.Background(), ids[0])
	if err != nil {
		t.Fatalf("read delivery: %v", err)
	}
	if rec.ResponseStatus == nil || *rec.ResponseStatus != http.StatusOK || rec.Attempts != 1 || rec.CompletedAt == nil {
		t.Errorf("delivery record after success: %s; want response_status 200, attempts 1, completed_at set", rec.Raw)
	}
	st := ep.Stats()
	if st.Requests != 1 || st.Accepted != 1 || st.BadSig != 0 {
		t.Errorf("receiver stats %+v, want exactly one accepted, correctly signed request", st)
	}
	if got := ep.Deliveries(); len(got) == 1 && (!got[0].SignatureOK || got[0].EventID != rec.EventID) {
		t.Errorf("receiver got event %q signed=%v verified=%v, want event %q with a valid signature",
			got[0].EventID, got[0].Signed, got[0].SignatureOK, rec.EventID)
	}
	methods.Range(func(m, _ any) bool {
		if m != http.MethodPost {
			t.Errorf("receiver saw a %v request, want only POST", m)
		}
		return true
	})

	if code, body := r.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answered %d %s, want 200", code, body)
	}
	code, body := r.get("/readyz")
	var ready struct {
		Status string `json:"status"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ready) != nil || ready.Status != "UP" {
		t.Errorf("/readyz answered %d %s, want 200 with status UP", code, body)
	}
}

func TestRun_ReadyzReportsDownWhenRedisIsStopped(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	r := startRelay(t, b.env())
	r.awaitHTTP(t, "/readyz", http.StatusOK, 10*time.Second)
	// The reference's probe paths (Spring Boot actuator) answer the same.
	r.awaitHTTP(t, "/actuator/health/readiness", http.StatusOK, 10*time.Second)
	r.awaitHTTP(t, "/actuator/health", http.StatusOK, 10*time.Second)

	if err := b.redis.Server.Stop(); err != nil {
		t.Fatalf("stop redis-server: %v", err)
	}
	body := r.awaitHTTP(t, "/readyz", http.StatusServiceUnavailable, 10*time.Second)
	if !strings.Contains(strings.ToLower(body), "redis") {
		t.Errorf("/readyz body %s does not say that Redis is the problem", body)
	}
	if code, body := r.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answered %d %s with Redis down, want 200 (the process itself is alive)", code, body)
	}
	r.awaitHTTP(t, "/actuator/health/readiness", http.StatusServiceUnavailable, 10*time.Second)
	if code, body := r.get("/actuator/health/liveness"); code != http.StatusOK || !strings.Contains(body, `"UP"`) {
		t.Errorf("/actuator/health/liveness answered %d %s with Redis down, want 200 UP", code, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := b.redis.Server.Restart(ctx); err != nil {
		t.Fatalf("restart redis-server: %v", err)
	}
	r.awaitHTTP(t, "/readyz", http.StatusOK, 10*time.Second)
}

func TestRun_EngineKilledMidDeliveryStillCompletes(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	h := newHold()
	_, ep := b.endpoint(t, "/held", "budget.exhausted", h.wrap)
	ids := b.emit(t, "budget.exhausted", 8)
	// Four sends in flight at the kill: a new subscription's adaptive limit
	// starts at a quarter of the workers, and the held receiver never
	// answers, so it stays there.
	env := b.env("JETRELAY_WORKERS", "16", "JETRELAY_MAX_IN_FLIGHT_PER_SUBSCRIPTION", "4", "JETRELAY_ACK_WAIT", "2s")

	first := startRelay(t, env)
	h.awaitHeld(t, 4, 15*time.Second)
	first.kill(t)
	inFlight := h.entered.Load()
	h.open()
	for id, st := range b.statuses(ids) {
		if st.Terminal() {
			t.Fatalf("delivery %s is %s although no send was answered before the kill", id, st)
		}
	}

	startRelay(t, env)
	b.awaitSuccess(t, ids, 20*time.Second)
	st := ep.Stats()
	t.Logf("in flight at the kill: %d; receiver: %+v", inFlight, st)
	if st.Unique != len(ids) || st.BadSig != 0 {
		t.Errorf("receiver accepted %d distinct events (%d bad signatures), want %d correctly signed", st.Unique, st.BadSig, len(ids))
	}
	if int64(st.Duplicates) > inFlight {
		t.Errorf("receiver saw %d duplicates, want at most the %d sends in flight at the kill", st.Duplicates, inFlight)
	}
}

func TestRun_SIGTERMDrainsWithinBoundedTime(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	var slowArrived atomic.Int64
	stuck := newHold()
	b.endpoint(t, "/slow", "budget.exhausted", slow(800*time.Millisecond, &slowArrived))
	b.endpoint(t, "/stuck", "budget.threshold_crossed", stuck.wrap)
	slowIDs := b.emit(t, "budget.exhausted", 3)
	stuckIDs := b.emit(t, "budget.threshold_crossed", 3)
	const drain = 2 * time.Second
	env := b.env("JETRELAY_DRAIN_TIMEOUT", drain.String(), "JETRELAY_ACK_WAIT", "2s")

	r := startRelay(t, env)
	stuck.awaitHeld(t, 3, 15*time.Second)
	deadline := time.Now().Add(15 * time.Second)
	for slowArrived.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := slowArrived.Load(); n < 3 {
		t.Fatalf("slow receiver got %d requests, want 3 in flight before SIGTERM", n)
	}

	sent := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	const margin = 3 * time.Second
	if code := r.wait(t, drain+margin); code != 0 {
		t.Fatalf("jetrelay exited %d after SIGTERM, want 0; output:\n%s", code, r.logs.tail(4<<10))
	}
	t.Logf("exited %s after SIGTERM (drain timeout %s)", time.Since(sent).Round(time.Millisecond), drain)

	for id, st := range b.statuses(slowIDs) {
		if st != proto.DeliverySuccess {
			t.Errorf("slow delivery %s is %s after the drain, want SUCCESS (it answered within the drain timeout)", id, st)
		}
	}
	for id, st := range b.statuses(stuckIDs) {
		if st != proto.DeliveryPending && st != proto.DeliveryRetrying {
			t.Errorf("cut-off delivery %s is %s after the drain, want it released as PENDING or RETRYING", id, st)
		}
	}

	stuck.open()
	startRelay(t, env)
	b.awaitSuccess(t, append(slowIDs, stuckIDs...), 15*time.Second)
}

func TestRun_BridgeKilledBetweenMoveAndPublishLosesNothing(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	_, ep := b.endpoint(t, "/hook", "budget.exhausted", nil)
	env := b.env("JETRELAY_ACK_WAIT", "1s")
	deadline := time.Now().Add(30 * time.Second)

	// Emits run to completion (no cancelled context), so every delivery
	// admin wrote is in ids.
	stop := make(chan struct{})
	var (
		mu      sync.Mutex
		ids     []string
		emitErr error
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		pace := time.NewTicker(5 * time.Millisecond)
		defer pace.Stop()
		for {
			select {
			case <-stop:
				return
			case <-pace.C:
			}
			_, got, err := b.writer.Emit(context.Background(), event("budget.exhausted"), admin.TraceSnapshot{})
			mu.Lock()
			ids = append(ids, got...)
			if err != nil {
				emitErr = err
			}
			mu.Unlock()
		}
	})

	var delays []time.Duration
	leftInFlight := 0 // kills that left ids in the processing list
	for range 5 {
		r := startRelay(t, env)
		d := rand.N(500 * time.Millisecond)
		delays = append(delays, d)
		time.Sleep(d) // the random moment of the crash, not a synchronisation
		r.kill(t)
		if b.redis.Client.LLen(context.Background(), "dispatch:processing:bridge-under-test").Val() > 0 {
			leftInFlight++
		}
	}
	close(stop)
	wg.Wait()
	if emitErr != nil {
		t.Fatalf("emit: %v", emitErr)
	}
	t.Logf("killed jetrelay 5 times, after %v; %d kills left ids in the processing list; %d deliveries emitted meanwhile",
		delays, leftInFlight, len(ids))

	startRelay(t, env)
	b.awaitSuccess(t, ids, time.Until(deadline))
	awaitEmptyQueues(t, b, time.Until(deadline))
	st := ep.Stats()
	t.Logf("receiver: %+v", st)
	if st.Unique != len(ids) || st.BadSig != 0 {
		t.Errorf("receiver accepted %d distinct events (%d bad signatures), want %d correctly signed", st.Unique, st.BadSig, len(ids))
	}
}

// awaitEmptyQueues waits until dispatch:pending and every bridge's
// processing list are empty: nothing is parked where no one will look.
func awaitEmptyQueues(t *testing.T, b *bed, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for {
		left := map[string]int64{}
		keys, err := b.redis.Client.Keys(ctx, "dispatch:processing:*").Result()
		if err != nil {
			t.Fatalf("list processing lists: %v", err)
		}
		for _, k := range append(keys, "dispatch:pending") {
			if n := b.redis.Client.LLen(ctx, k).Val(); n > 0 {
				left[k] = n
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ids still queued after %s: %v", within, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
