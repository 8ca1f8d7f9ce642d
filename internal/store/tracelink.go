package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// traceLinkPrefix starts the keys of TraceLinkKey. They are strings, so the
// retention pass (which scans events:* and deliveries:* for ZSETs) never
// visits them.
const traceLinkPrefix = "jetrelay:trace:"

// TraceLinkKey is where the engine, while tracing records, keeps the span
// context of a delivery's last handling that ended without a final outcome
// (a retry scheduled, a put-off, a nak), so that the delivery's next
// handling, on any replica, can link its span to it. The value is that
// span's W3C traceparent; the key expires on its own (RememberAttempt's ttl)
// and is removed when a handling that found it reaches a final outcome.
func TraceLinkKey(deliveryID string) string { return traceLinkPrefix + deliveryID }

// RememberAttempt stores traceparent as delivery id's last handling for ttl,
// replacing the one before.
func (s *Store) RememberAttempt(ctx context.Context, id, traceparent string, ttl time.Duration) error {
	if err := s.rdb.Set(ctx, TraceLinkKey(id), traceparent, ttl).Err(); err != nil {
		return fmt.Errorf("store: remember attempt of %s: %w", strconv.Quote(id), err)
	}
	return nil
}

// LastAttempt returns the traceparent RememberAttempt stored for delivery
// id, or "" when there is none.
func (s *Store) LastAttempt(ctx context.Context, id string) (string, error) {
	v, err := s.rdb.Get(ctx, TraceLinkKey(id)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("store: read last attempt of %s: %w", strconv.Quote(id), err)
	}
	return v, nil
}

// ForgetAttempt removes what RememberAttempt stored for delivery id.
func (s *Store) ForgetAttempt(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, TraceLinkKey(id)).Err(); err != nil {
		return fmt.Errorf("store: forget attempt of %s: %w", strconv.Quote(id), err)
	}
	return nil
}
