package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SecurityConfigKey holds admin's webhook destination policy (§3.5).
const SecurityConfigKey = "config:webhook-security"

// maxSecurityConfig bounds the policy value read: a real one is a few
// hundred bytes, and it is read again on every refresh.
const maxSecurityConfig = 1 << 20

// WebhookSecurity returns the raw config:webhook-security value, ErrNotFound
// when no policy is stored, or a *CorruptError when the key holds another
// type or a value over 1 MiB (it is not read then).
func (s *Store) WebhookSecurity(ctx context.Context) ([]byte, error) {
	n, err := s.rdb.StrLen(ctx, SecurityConfigKey).Result()
	if err != nil {
		return nil, classifyGet(SecurityConfigKey, err)
	}
	if n > maxSecurityConfig {
		return nil, &CorruptError{Key: SecurityConfigKey, Err: fmt.Errorf("value is %d bytes, more than %d", n, maxSecurityConfig)}
	}
	return s.get(ctx, SecurityConfigKey)
}

// SecretSample is one stored signing secret, as kept at rest.
type SecretSample struct {
	Key    string
	Stored string // "enc:…" or a legacy plaintext secret; never log it
}

// secretScanRounds bounds the SCAN calls of SampleSecrets, so a huge
// keyspace with few secrets cannot stall start-up.
const secretScanRounds = 50

// SampleSecrets returns up to limit stored signing secrets
// (webhook:secret:*), for a start-up check that the encryption key fits
// them. It looks at a bounded part of the keyspace; keys of another type
// are skipped.
func (s *Store) SampleSecrets(ctx context.Context, limit int) ([]SecretSample, error) {
	var keys []string
	var cursor uint64
	for range secretScanRounds {
		batch, next, err := s.rdb.Scan(ctx, cursor, SecretKey("*"), 200).Result()
		if err != nil {
			return nil, fmt.Errorf("store: scan signing secrets: %w", err)
		}
		keys = append(keys, batch...)
		cursor = next
		if cursor == 0 || len(keys) >= limit {
			break
		}
	}
	keys = keys[:min(len(keys), limit)]
	if len(keys) == 0 {
		return nil, nil
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: read signing secrets: %w", err)
	}
	out := make([]SecretSample, 0, len(keys))
	for i, v := range vals {
		if str, ok := v.(string); ok && strings.HasPrefix(keys[i], SecretKey("")) {
			out = append(out, SecretSample{Key: keys[i], Stored: str})
		}
	}
	return out, nil
}
