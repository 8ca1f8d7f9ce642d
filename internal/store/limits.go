package store

import "fmt"

// Bounds on the records an attempt reads. Real records are a few KiB (an
// event's data is a small JSON object); these leave ample room and keep a
// broken or hostile writer from making jetrelay parse, hold and send
// megabytes per delivery. Redis itself caps a string at 512 MB, which is
// what a value is read up to before it is refused.
const (
	// MaxDeliveryRecord bounds delivery:{id}.
	MaxDeliveryRecord = 1 << 20
	// MaxSubscriptionRecord bounds webhook:{id}.
	MaxSubscriptionRecord = 1 << 20
	// MaxEventRecord bounds event:{id}, whose bytes are the request body.
	MaxEventRecord = 4 << 20
)

// checkSize refuses a record over limit as corrupt: retrying cannot shrink
// it. raw is kept for quarantine, which cuts it.
func checkSize(key string, raw []byte, limit int) error {
	if len(raw) <= limit {
		return nil
	}
	return &CorruptError{Key: key, Err: fmt.Errorf("record is %d bytes, more than the %d allowed", len(raw), limit), Raw: raw}
}
