package main

import (
	"context"
	"encoding/base64"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// rotatingReceiver verifies every request the way a Standard Webhooks
// receiver does, with the secrets it holds at that moment, and answers 503
// until it is told to accept, so deliveries keep retrying.
type rotatingReceiver struct {
	mu       sync.Mutex
	verifier *receive.Verifier
	accept   bool
	// what the test checks
	requests, refused, dualSigned atomic.Int64
	cyclesMismatch                atomic.Int64
	cyclesSecrets                 []string
	accepted                      sync.Map // event id → true
}

func (rr *rotatingReceiver) hold(t *testing.T, accept bool, secrets ...string) {
	t.Helper()
	v, err := receive.NewVerifier(secrets, receive.WithStandardWebhooksOnly())
	if err != nil {
		t.Fatal(err)
	}
	rr.mu.Lock()
	rr.verifier, rr.accept = v, accept
	rr.mu.Unlock()
}

func (rr *rotatingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rr.requests.Add(1)
	rr.mu.Lock()
	v, accept, cycles := rr.verifier, rr.accept, rr.cyclesSecrets
	rr.mu.Unlock()
	id := receive.IdentityFromHTTP(r.Header)
	if err := v.VerifyIdentity(body, id); err != nil {
		rr.refused.Add(1)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if len(proto.ParseWebhookSignatures(id.WebhookSignature)) == 2 {
		rr.dualSigned.Add(1)
	}
	// X-Cycles-Signature stays the reference's: made with one of the
	// secrets admin stored (the current one at the time of the send).
	ok := false
	for _, s := range cycles {
		ok = ok || proto.Verify(s, body, id.Signature)
	}
	if !ok {
		rr.cyclesMismatch.Add(1)
	}
	if !accept {
		http.Error(w, "not yet", http.StatusServiceUnavailable)
		return
	}
	rr.accepted.Store(id.EventID, true)
}

// A subscription's secret is rotated (admin's PATCH signing_secret) while
// its deliveries are retrying; the receiver, which verifies Standard
// Webhooks only, keeps the old secret for a while and then switches to the
// new one within the grace period. Every request verifies with the secret
// the receiver holds at that moment, no delivery fails, and the previous
// secret is kept encrypted, out of `subscriptions settings`' output.
func TestRun_SecretRotatedWhileRetryingFailsNothingAndEveryRequestVerifies(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	ctx := context.Background()
	oneSec, hundredMs, mult := int64(1000), int64(200), 1.5
	retries := 10
	subID, oldSecret, err := b.writer.CreateSubscription(ctx, admin.Subscription{
		TenantID: "tenant-proc", Name: "rotation", URL: b.recvBase + "/rotating", EventTypes: []string{"budget.exhausted"},
		RetryPolicy:          &proto.RetryPolicy{MaxRetries: &retries, InitialDelayMs: &hundredMs, BackoffMultiplier: &mult, MaxDelayMs: &oneSec},
		DisableAfterFailures: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	rr := &rotatingReceiver{cyclesSecrets: []string{oldSecret}}
	rr.hold(t, false, oldSecret)
	b.mux.Handle("/rotating", rr)

	// Opted in with the real command (the fleet default stays off).
	if code, out := runBinary(t, b.env(), 30*time.Second, "subscriptions", "settings", subID, "--standard-webhooks", "true"); code != 0 || !strings.Contains(out, `"standard_webhooks":true`) {
		t.Fatalf("subscriptions settings --standard-webhooks true: exit %d\n%s", code, out)
	}
	ids := b.emit(t, "budget.exhausted", 5)
	startRelay(t, b.env("JETRELAY_BREAKER_THRESHOLD", "1000"))

	// Every delivery is retrying against the old secret.
	awaitCount(t, "requests before the rotation", &rr.requests, 2*int64(len(ids)), 30*time.Second)

	// Admin replaces the secret: a new whsec_ (base64url, as admin mints
	// them), stored encrypted.
	raw := make([]byte, 32)
	for i := range raw {
		raw[i] = byte(rand.IntN(256))
	}
	newSecret := "whsec_" + base64.RawURLEncoding.EncodeToString(raw)
	key, err := proto.ParseSecretKey(b.keyB64)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := key.Encrypt(newSecret)
	if err != nil {
		t.Fatal(err)
	}
	rr.mu.Lock()
	rr.cyclesSecrets = []string{oldSecret, newSecret}
	rr.mu.Unlock()
	if err := b.redis.Client.Set(ctx, store.SecretKey(subID), enc, 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Retries go on, now signed with both; the receiver still holds only
	// the old secret and verifies them.
	awaitCount(t, "requests signed with both secrets", &rr.dualSigned, 2*int64(len(ids)), 30*time.Second)

	// The receiver switches to the new secret (within the grace period)
	// and accepts.
	rr.hold(t, true, newSecret)
	b.awaitSuccess(t, ids, 60*time.Second)

	if n := rr.refused.Load(); n != 0 {
		t.Errorf("the receiver refused %d of %d requests; every one must verify with the secret it held", n, rr.requests.Load())
	}
	if n := rr.cyclesMismatch.Load(); n != 0 {
		t.Errorf("%d requests carried an X-Cycles-Signature made with neither stored secret", n)
	}
	set, rawSettings, err := b.store.Settings(ctx, subID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(set.PreviousSecret, "enc:") || set.PreviousSecretUntil == nil ||
		time.Until(set.PreviousSecretUntil.Time) < 23*time.Hour {
		t.Errorf("settings record after the rotation: previous secret stored as %.4q…, until %v; want enc: and about 24h ahead", set.PreviousSecret, set.PreviousSecretUntil)
	}
	for _, s := range []string{oldSecret, newSecret} {
		if strings.Contains(string(rawSettings), s) {
			t.Errorf("the settings record holds a signing secret in plaintext")
		}
	}
	code, out := runBinary(t, b.env(), 30*time.Second, "subscriptions", "settings", subID)
	if code != 0 || !strings.Contains(out, "previous_secret_until") || strings.Contains(out, "enc:") ||
		strings.Contains(out, oldSecret) || strings.Contains(out, newSecret) {
		t.Errorf("subscriptions settings: exit %d, output %s; want the grace end shown and no secret", code, out)
	}
}

func awaitCount(t *testing.T, what string, n *atomic.Int64, want int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d after %s, want at least %d", what, n.Load(), within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
