package engine_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/redisproc"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

func TestRetry_FlakyEndpointRecoversAndTerminalStateClearsRetryFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/flaky", receiver.FailFirst(2), nil)
	id := e.deliver(t, sub, e.event(), nil)
	rec := e.final(t, id)
	if rec.Status != proto.DeliverySuccess || rec.Attempts != 3 {
		t.Fatalf("record = %s; want SUCCESS after 3 attempts", rec.Raw)
	}
	if !strings.Contains(string(rec.Raw), `"error_message":null`) || !strings.Contains(string(rec.Raw), `"next_retry_at":null`) {
		t.Errorf("retry fields not cleared on success: %s", rec.Raw)
	}
	if s := ep.Stats(); s.Requests != 3 || s.Unique != 1 || s.Duplicates != 0 {
		t.Errorf("receiver stats %+v", s)
	}
}

func TestRetry_ExhaustsAfterMaxRetriesPlusOneSendsAndCountsAFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/down", receiver.Always(http.StatusInternalServerError), func(s *admin.Subscription) {
		s.RetryPolicy = fastPolicy(2)
	})
	id := e.deliver(t, sub, e.event(), nil)
	rec := e.final(t, id)
	if rec.Status != proto.DeliveryFailed || rec.Attempts != 3 || rec.ErrorMessage == nil || *rec.ErrorMessage != "HTTP 500" {
		t.Fatalf("record = %s; want FAILED after max_retries+1 = 3 sends with HTTP 500", rec.Raw)
	}
	if rec.ResponseStatus == nil || *rec.ResponseStatus != 500 || rec.ResponseTimeMs == nil {
		t.Errorf("final attempt's response not recorded: %s", rec.Raw)
	}
	if !strings.Contains(string(rec.Raw), `"next_retry_at":null`) {
		t.Errorf("next_retry_at not cleared on FAILED: %s", rec.Raw)
	}
	if n := ep.Stats().Requests; n != 3 {
		t.Errorf("receiver got %d sends, want 3", n)
	}
	s := e.subscription(t, sub)
	if s.ConsecutiveFailures != 1 || s.LastFailureAt == nil || s.Status != proto.SubscriptionActive {
		t.Errorf("subscription after one exhausted delivery: failures=%d last_failure_at=%v status=%s", s.ConsecutiveFailures, s.LastFailureAt, s.Status)
	}
}

func TestRetry_DefaultPolicyWaits1_2_4_8_16SecondsThenFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/slowfail", receiver.Always(http.StatusServiceUnavailable), func(s *admin.Subscription) {
		s.RetryPolicy = nil // admin's default policy: 5 retries, 1 s doubling, 60 s cap
	})
	id := e.deliver(t, sub, e.event(), nil)
	waitFor(t, 45*time.Second, "the default schedule to run out", func() bool {
		r, err := e.store.Delivery(context.Background(), id)
		return err == nil && r.Status == proto.DeliveryFailed
	})
	got := ep.Deliveries()
	if len(got) != 6 {
		t.Fatalf("%d sends, want 6 (max_retries 5 + 1)", len(got))
	}
	for i, want := range []time.Duration{1, 2, 4, 8, 16} {
		want *= time.Second
		gap := got[i+1].At.Sub(got[i].At)
		if gap < want || gap > want+600*time.Millisecond {
			t.Errorf("gap before send %d = %s, want %s (+ small tolerance)", i+2, gap, want)
		}
	}
}

func TestAutoDisable_ReachingThresholdDisablesAndSavesWebhookDisabledEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/dead", receiver.Always(http.StatusBadGateway), func(s *admin.Subscription) {
		s.RetryPolicy = fastPolicy(0)
		s.DisableAfterFailures = 2
	})
	var last string
	for range 2 {
		ev := e.event()
		last = e.deliver(t, sub, ev, nil)
		if rec := e.final(t, last); rec.Status != proto.DeliveryFailed {
			t.Fatalf("status %s", rec.Status)
		}
	}
	s := e.subscription(t, sub)
	if s.Status != proto.SubscriptionDisabled || s.ConsecutiveFailures != 2 {
		t.Fatalf("subscription status=%s failures=%d; want DISABLED at 2", s.Status, s.ConsecutiveFailures)
	}
	ctx := context.Background()
	cid := "webhook_auto_disable:" + sub + ":" + last
	// The event is saved just after the DISABLED write, so wait for it.
	var ids []string
	waitFor(t, 5*time.Second, "the webhook.disabled event", func() bool {
		ids, _ = e.redis.Client.SMembers(ctx, "events:correlation:"+cid).Result()
		return len(ids) > 0
	})
	if len(ids) != 1 {
		t.Fatalf("webhook.disabled correlation set: %v", ids)
	}
	raw, err := e.redis.Client.Get(ctx, "event:"+ids[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"event_type":"webhook.disabled"`, `"category":"webhook"`, `"tenant_id":"acme-corp"`, `"source":"cycles-events"`,
		`"previous_status":"ACTIVE"`, `"new_status":"DISABLED"`, `"disable_reason":"consecutive_failures_exceeded_threshold"`, `"correlation_id":"` + cid + `"`} {
		if !strings.Contains(raw, want) {
			t.Errorf("webhook.disabled event lacks %s: %s", want, raw)
		}
	}
	for _, key := range []string{"events:acme-corp", "events:_all"} {
		if _, err := e.redis.Client.ZScore(ctx, key, ids[0]).Result(); err != nil {
			t.Errorf("event not indexed in %s: %v", key, err)
		}
	}
	// Later deliveries to the disabled subscription wait, unsent, for an
	// operator to re-enable it (or for the stale cutoff).
	before := ep.Stats().Requests
	held := e.deliver(t, sub, e.event(), nil)
	waitFor(t, 10*time.Second, "the delivery to a disabled subscription to be parked", func() bool { return e.parked(held) })
	if n := ep.Stats().Requests; n != before {
		t.Errorf("disabled subscription got %d more sends", n-before)
	}
}

func TestAutoDisable_SuccessResetsConsecutiveFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, _ := e.subscribe(t, "/recovering", receiver.Healthy(), nil)
	if _, err := e.store.UpdateSubscription(context.Background(), sub, func(*proto.Subscription) (store.Patch, error) {
		return store.Patch{{Name: "consecutive_failures", Value: 7}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.final(t, e.deliver(t, sub, e.event(), nil))
	waitFor(t, 5*time.Second, "consecutive_failures reset by a success", func() bool {
		s := e.subscription(t, sub)
		return s.ConsecutiveFailures == 0 && s.LastSuccessAt != nil
	})
}

func TestRetry_ReceiverRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var at []time.Time
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		n := len(at)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e := newEnv(t, envOptions{handler: h})
	sub, _, _ := e.subscribe(t, "/custom/throttle", nil, nil)
	rec := e.final(t, e.deliver(t, sub, e.event(), nil))
	if rec.Status != proto.DeliverySuccess || rec.Attempts != 2 {
		t.Fatalf("record = %s", rec.Raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if gap := at[1].Sub(at[0]); gap < 2*time.Second {
		t.Errorf("retried after %s; the receiver asked for 2s (policy alone would wait 100ms)", gap)
	}
}

func TestInfraError_RedisDownDelaysButNeverFailsADelivery(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	arrived := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived); <-release })
		w.WriteHeader(http.StatusOK)
	})
	e := newEnv(t, envOptions{handler: h, redis: redisproc.Options{AppendOnly: true}})
	sub, _, _ := e.subscribe(t, "/custom/blocked", nil, nil)
	id := e.deliver(t, sub, e.event(), nil)

	<-arrived                                     // the engine has read everything and is mid-send
	if err := e.redis.Server.Kill(); err != nil { // a crash; the AOF keeps what was written
		t.Fatal(err)
	}
	close(release) // the send succeeds, but its outcome cannot be written
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Give the engine time to hit the outage on its write and on a retry.
	waitFor(t, 10*time.Second, "the engine to meet the outage", func() bool {
		return e.redis.Client.Ping(ctx).Err() != nil
	})
	if err := e.redis.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	rec := e.final(t, id)
	if rec.Status != proto.DeliverySuccess {
		t.Fatalf("after the outage the delivery is %s, want SUCCESS (never FAILED because Redis was down): %s", rec.Status, rec.Raw)
	}
}

func TestDuplicateWorkItems_AreSentAtMostOncePerAttemptAndCountedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, _ := e.subscribe(t, "/dup", receiver.Always(http.StatusInternalServerError), func(s *admin.Subscription) {
		s.RetryPolicy = fastPolicy(0)
	})
	id := e.deliver(t, sub, e.event(), nil)
	// A second copy of the same work item under another message id, as a
	// republish after the duplicate window or a second producer would make.
	ctx := context.Background()
	for i := range 3 {
		if _, err := e.js.PublishMsg(ctx, queue.NewRequeueMsg(e.qc.Subject, id, uint64(1000+i))); err != nil {
			t.Fatal(err)
		}
	}
	rec := e.final(t, id)
	e.idle(t)
	if rec.Status != proto.DeliveryFailed || rec.Attempts != 1 {
		t.Fatalf("record = %s; want FAILED after its single attempt", rec.Raw)
	}
	if s := e.subscription(t, sub); s.ConsecutiveFailures != 1 {
		t.Errorf("consecutive_failures = %d; one exhausted delivery must count once however many copies ran", s.ConsecutiveFailures)
	}
}
