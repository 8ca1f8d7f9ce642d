package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestWebhookSecurity_ReadsThePolicyAndRefusesWhatItCannotTrust(t *testing.T) {
	s, c, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.WebhookSecurity(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent: %v, want ErrNotFound", err)
	}
	mustSet(t, c, SecurityConfigKey, `{"allow_http":true}`)
	if raw, err := s.WebhookSecurity(ctx); err != nil || string(raw) != `{"allow_http":true}` {
		t.Fatalf("stored: %q, %v", raw, err)
	}
	mustSet(t, c, SecurityConfigKey, strings.Repeat("x", maxSecurityConfig+1))
	if _, err := s.WebhookSecurity(ctx); !errors.Is(err, ErrCorrupt) || strings.Contains(err.Error(), "xxx") {
		t.Fatalf("huge: %v, want a corrupt record that does not quote it", err)
	}
	c.Del(ctx, SecurityConfigKey)
	c.HSet(ctx, SecurityConfigKey, "allow_http", "true")
	if _, err := s.WebhookSecurity(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a hash: %v, want a corrupt record", err)
	}
}

func TestSampleSecrets_ReturnsABoundedSampleOfStoredSecretsOnly(t *testing.T) {
	s, c, _ := newStore(t)
	ctx := context.Background()
	if got, err := s.SampleSecrets(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("empty keyspace: %v, %v", got, err)
	}
	for i := range 30 {
		mustSet(t, c, SecretKey(fmt.Sprintf("whsub_%02d", i)), "enc:AAAA")
	}
	c.HSet(ctx, SecretKey("whsub_hash"), "a", "b")
	mustSet(t, c, SubscriptionKey("whsub_00"), `{}`)
	got, err := s.SampleSecrets(ctx, 10)
	if err != nil || len(got) == 0 || len(got) > 10 {
		t.Fatalf("sample = %d entries, %v; want 1..10", len(got), err)
	}
	for _, g := range got {
		if !strings.HasPrefix(g.Key, "webhook:secret:whsub_") || g.Stored != "enc:AAAA" {
			t.Errorf("unexpected sample %s", g.Key)
		}
	}
}
