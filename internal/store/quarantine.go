package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// maxQuarantined bounds FailedList so a flood of bad input cannot grow
	// Redis without limit; the oldest entries go first.
	maxQuarantined = 10000
	// maxQuarantinePayload bounds one entry's copy of the offending record.
	maxQuarantinePayload = 64 << 10
)

// quarantineEntry is one FailedList element; operators read it with LRANGE.
type quarantineEntry struct {
	DeliveryID       string `json:"delivery_id"`
	Reason           string `json:"reason"`
	QuarantinedAtMs  int64  `json:"quarantined_at_ms"`
	Payload          string `json:"payload"`
	PayloadTruncated bool   `json:"payload_truncated,omitempty"`
}

// Quarantine records a work item that cannot be processed where an operator
// will see it, like upstream's dispatch:failed: a JSON entry with the
// delivery id, the reason and the raw record (as a string, cut to 64 KiB),
// pushed to FailedList, which is trimmed to its newest 10000 entries in the
// same transaction.
func (s *Store) Quarantine(ctx context.Context, deliveryID, reason string, payload []byte) error {
	e := quarantineEntry{
		DeliveryID:      deliveryID,
		Reason:          reason,
		QuarantinedAtMs: time.Now().UnixMilli(),
		Payload:         string(payload),
	}
	if len(payload) > maxQuarantinePayload {
		e.Payload = cutUTF8(e.Payload, maxQuarantinePayload)
		e.PayloadTruncated = true
	}
	entry, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("store: quarantine %s: %w", deliveryID, err)
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, FailedList, entry)
		p.LTrim(ctx, FailedList, 0, maxQuarantined-1)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: quarantine %s: %w", deliveryID, err)
	}
	return nil
}
