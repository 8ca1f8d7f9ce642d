package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// awaitStatus polls until every delivery in ids has status want.
func (b *bed) awaitStatus(t *testing.T, ids []string, want proto.DeliveryStatus, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := b.statuses(ids)
		done := true
		for _, id := range ids {
			done = done && got[id] == want
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries not %s after %s: %v", want, within, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRun_RefusesALoopbackReceiverAsSSRFBlockedUntilThePolicyAllowsIt(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	subID, ep := b.endpoint(t, "/hook", "budget.exhausted", nil)
	blocked := b.emit(t, "budget.exhausted", 1)

	// No operator allow-list: the receiver on 127.0.0.1 is what the guard
	// exists to refuse. http is allowed so that the address check decides.
	startRelay(t, b.env("JETRELAY_SSRF_ALLOW_CIDRS", "", "JETRELAY_SSRF_ALLOW_HTTP", "true", "JETRELAY_SSRF_REFRESH", "200ms"))
	b.awaitStatus(t, blocked, proto.DeliveryFailed, 15*time.Second)

	ctx := context.Background()
	rec, err := b.store.Delivery(ctx, blocked[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec.ErrorMessage == nil || !strings.HasPrefix(*rec.ErrorMessage, "Blocked by SSRF policy: resolves to blocked IP 127.0.0.1 (in 127.0.0.0/8)") {
		t.Errorf("error_message = %v, want the SSRF refusal", rec.ErrorMessage)
	}
	if rec.Attempts != 0 || rec.ResponseStatus != nil {
		t.Errorf("record = %s; want attempts 0 and response_status null: a refused send is no attempt (upstream 0.1.25.22)", rec.Raw)
	}
	if n := ep.Stats().Requests; n != 0 {
		t.Errorf("the blocked receiver got %d requests", n)
	}
	sub, err := proto.ParseSubscription([]byte(b.redis.Client.Get(ctx, store.SubscriptionKey(subID)).Val()))
	if err != nil {
		t.Fatal(err)
	}
	if sub.ConsecutiveFailures != 0 || sub.Status != proto.SubscriptionActive {
		t.Errorf("subscription consecutive_failures=%d status=%s, want 0 ACTIVE: ssrf_blocked does not count toward auto-disable",
			sub.ConsecutiveFailures, sub.Status)
	}

	// The operator turns the check off (unsafe, for tests) in Redis: no restart.
	if err := b.redis.Client.Set(ctx, store.SecurityConfigKey, `{"blocked_cidr_ranges":[],"allow_http":true}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // two refresh periods: there is no event to await for a policy swap
	allowed := b.emit(t, "budget.exhausted", 1)
	b.awaitSuccess(t, allowed, 15*time.Second)
}

func TestRun_StartupFailsWhenEncryptedSecretsExistAndTheKeyIsMissingOrWrong(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	b.endpoint(t, "/hook", "budget.exhausted", nil) // admin stores an enc: secret
	raw := make([]byte, 32)
	rand.Read(raw)
	otherKey := base64.StdEncoding.EncodeToString(raw)

	for _, tc := range []struct{ name, key, want string }{
		{"missing", "", "WEBHOOK_SECRET_ENCRYPTION_KEY is not set"},
		{"wrong", otherKey, "WEBHOOK_SECRET_ENCRYPTION_KEY decrypts none of the 1 encrypted signing secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := b.env("WEBHOOK_SECRET_ENCRYPTION_KEY", tc.key, "MANAGEMENT_PORT", "0", "JETRELAY_DATA_DIR", t.TempDir())
			code, out := runBinary(t, env, 30*time.Second, "run")
			if code == 0 || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, output:\n%s\nwant a failed start naming %q", code, out, tc.want)
			}
			if strings.Contains(out, "enc:") || strings.Contains(out, otherKey) {
				t.Errorf("output quotes a secret or the key:\n%s", out)
			}
		})
	}
}
