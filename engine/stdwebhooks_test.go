package engine_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// With Standard Webhooks on for the fleet, a subscription without a setting
// of its own gets webhook-id (the event id), webhook-timestamp (now) and a
// webhook-signature that verifies with its secret, beside an unchanged
// X-Cycles-Signature; a subscription whose own setting is false gets none of
// them. The secret jetrelay keeps a copy of for rotations is the stored,
// encrypted form.
func TestStandardWebhooks_SubscriptionSettingOverridesTheFleetDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{adminKey: testKey, engineKey: testKey, engine: func(c *engine.Config) { c.StandardWebhooks = true }})
	ctx := context.Background()
	on, onSecret, onEP := e.subscribe(t, "/on", receiver.Healthy(), nil)
	off, offSecret, offEP := e.subscribe(t, "/off", receiver.Healthy(), nil)
	if _, err := e.store.UpdateSettings(ctx, off, func(*proto.SubscriptionSettings) (store.Patch, error) {
		return store.Patch{{Name: "standard_webhooks", Value: false}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.final(t, e.deliver(t, on, e.event(), nil))
	e.final(t, e.deliver(t, off, e.event(), nil))

	got := onEP.Deliveries()
	if len(got) != 1 {
		t.Fatalf("/on got %d requests, want 1", len(got))
	}
	r := got[0]
	if r.Header.Get("X-Cycles-Signature") != proto.Sign(onSecret, r.Body) {
		t.Errorf("X-Cycles-Signature changed beside Standard Webhooks: %q", r.Header.Get("X-Cycles-Signature"))
	}
	if id := r.Header.Get(proto.HeaderWebhookID); id == "" || id != r.Header.Get(proto.HeaderEventID) {
		t.Errorf("webhook-id %q, want the event id %q", id, r.Header.Get(proto.HeaderEventID))
	}
	if err := proto.VerifyStandardWebhooks([][]byte{proto.StandardWebhooksKey(onSecret)}, r.Header.Get(proto.HeaderWebhookID),
		r.Header.Get(proto.HeaderWebhookTimestamp), r.Header.Get(proto.HeaderWebhookSignature), r.Body, time.Now(), 0); err != nil {
		t.Errorf("webhook-signature %q does not verify: %v", r.Header.Get(proto.HeaderWebhookSignature), err)
	}
	if n := len(proto.ParseWebhookSignatures(r.Header.Get(proto.HeaderWebhookSignature))); n != 1 {
		t.Errorf("webhook-signature carries %d signatures without a rotation, want 1", n)
	}
	set, _, err := e.store.Settings(ctx, on)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := e.redis.Client.Get(ctx, store.SecretKey(on)).Result()
	if set.Secret != stored || !strings.HasPrefix(set.Secret, "enc:") || set.PreviousSecret != "" {
		t.Errorf("settings record keeps secret %.4q… (stored %.4q…), previous %q; want the stored enc: form and no previous", set.Secret, stored, set.PreviousSecret)
	}

	got = offEP.Deliveries()
	if len(got) != 1 {
		t.Fatalf("/off got %d requests, want 1", len(got))
	}
	r = got[0]
	for _, h := range []string{proto.HeaderWebhookID, proto.HeaderWebhookTimestamp, proto.HeaderWebhookSignature} {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("a subscription with standard_webhooks false got %s: %q", h, v)
		}
	}
	if r.Header.Get("X-Cycles-Signature") != proto.Sign(offSecret, r.Body) {
		t.Errorf("X-Cycles-Signature %q does not verify", r.Header.Get("X-Cycles-Signature"))
	}
}

// headerLog records the headers of every request it answers (200).
type headerLog struct {
	mu     sync.Mutex
	got    []http.Header
	bodies [][]byte
}

func (l *headerLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	l.got, l.bodies = append(l.got, r.Header.Clone()), append(l.bodies, body)
	l.mu.Unlock()
}

// request returns the nth request (1-based), waiting for it.
func (l *headerLog) request(t *testing.T, n int) (http.Header, []byte) {
	t.Helper()
	waitFor(t, 10*time.Second, "a request", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.got) >= n })
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.got[n-1], l.bodies[n-1]
}

// verifiesWith reports whether the request's webhook-signature holds a
// signature made with secret.
func verifiesWith(h http.Header, body []byte, secret string) bool {
	return proto.VerifyStandardWebhooks([][]byte{proto.StandardWebhooksKey(secret)}, h.Get(proto.HeaderWebhookID),
		h.Get(proto.HeaderWebhookTimestamp), h.Get(proto.HeaderWebhookSignature), body, time.Now(), 0) == nil
}

// After admin replaces the secret, deliveries carry both secrets'
// signatures for the grace period; once it is over they carry the new
// secret's alone and the previous secret is gone from the settings record.
func TestStandardWebhooks_PreviousSecretSignsForTheGraceThenIsDropped(t *testing.T) {
	t.Parallel()
	log := &headerLog{}
	grace := 2 * time.Second
	e := newEnv(t, envOptions{adminKey: testKey, engineKey: testKey, handler: log,
		engine: func(c *engine.Config) { c.StandardWebhooks, c.SecretRotationGrace = true, grace }})
	ctx := context.Background()
	sub, oldSecret, _ := e.subscribe(t, "/custom/rotate", receiver.Healthy(), nil)
	e.final(t, e.deliver(t, sub, e.event(), nil))
	if h, body := log.request(t, 1); len(proto.ParseWebhookSignatures(h.Get(proto.HeaderWebhookSignature))) != 1 || !verifiesWith(h, body, oldSecret) {
		t.Fatalf("before the rotation: webhook-signature %q, want the old secret's alone", h.Get(proto.HeaderWebhookSignature))
	}

	newSecret := "whsec_bmV3LXNlY3JldC1ieXRlcw"
	enc, err := parseKey(t, testKey).Encrypt(newSecret)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.redis.Client.Set(ctx, store.SecretKey(sub), enc, 0).Err(); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	e.final(t, e.deliver(t, sub, e.event(), nil))
	h, body := log.request(t, 2)
	if len(proto.ParseWebhookSignatures(h.Get(proto.HeaderWebhookSignature))) != 2 || !verifiesWith(h, body, oldSecret) || !verifiesWith(h, body, newSecret) {
		t.Fatalf("during the grace: webhook-signature %q, want the new and the old secret's", h.Get(proto.HeaderWebhookSignature))
	}
	if !proto.Verify(newSecret, body, h.Get(proto.HeaderSignature)) {
		t.Fatalf("X-Cycles-Signature %q is not the current secret's, as the reference signs", h.Get(proto.HeaderSignature))
	}
	set, _, err := e.store.Settings(ctx, sub)
	if err != nil || !strings.HasPrefix(set.PreviousSecret, "enc:") || set.PreviousSecretUntil == nil {
		t.Fatalf("settings during the grace: %+v, %v; want an enc: previous secret with its end", set, err)
	}

	time.Sleep(time.Until(rotated.Add(grace + 100*time.Millisecond)))
	e.final(t, e.deliver(t, sub, e.event(), nil))
	if h, body := log.request(t, 3); len(proto.ParseWebhookSignatures(h.Get(proto.HeaderWebhookSignature))) != 1 || !verifiesWith(h, body, newSecret) {
		t.Fatalf("after the grace: webhook-signature %q, want the new secret's alone", h.Get(proto.HeaderWebhookSignature))
	}
	if set, _, err = e.store.Settings(ctx, sub); err != nil || set.PreviousSecret != "" || set.PreviousSecretUntil != nil {
		t.Fatalf("settings after the grace: previous secret %.4q…, until %v (%v); want both removed", set.PreviousSecret, set.PreviousSecretUntil, err)
	}
}
