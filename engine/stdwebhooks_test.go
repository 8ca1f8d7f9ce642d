package engine_test

import (
	"context"
	"strings"
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
