package queue

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxDeliveryIDLen bounds a delivery id. Real ids are ~40 bytes; anything far
// longer is corrupt input, and every id is also held in the dedupe map.
const MaxDeliveryIDLen = 256

// ErrInvalidDeliveryID is wrapped by every delivery id validation error.
var ErrInvalidDeliveryID = errors.New("invalid delivery id")

// ValidateDeliveryID reports why id cannot be a work item: empty, longer
// than MaxDeliveryIDLen, not UTF-8, or holding whitespace or control
// characters (which could not travel in a Nats-Msg-Id header nor be a clean
// Redis key suffix).
func ValidateDeliveryID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidDeliveryID)
	case len(id) > MaxDeliveryIDLen:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidDeliveryID, len(id), MaxDeliveryIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidDeliveryID)
	}
	for i, r := range id {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%w: whitespace or control character %U at byte %d", ErrInvalidDeliveryID, r, i)
		}
	}
	return nil
}

// NewMsg builds the work item for deliveryID: the id is the body and the
// Nats-Msg-Id, so publishing it twice within the dedupe window stores it once.
func NewMsg(subject, deliveryID string) *nats.Msg {
	return &nats.Msg{
		Subject: subject,
		Data:    []byte(deliveryID),
		Header:  nats.Header{jetstream.MsgIDHeader: []string{deliveryID}},
	}
}

// DeliveryID extracts and validates the delivery id of a work item.
func DeliveryID(m jetstream.Msg) (string, error) {
	id := string(m.Data())
	if err := ValidateDeliveryID(id); err != nil {
		return "", err
	}
	if hdr := m.Headers().Get(jetstream.MsgIDHeader); hdr != "" && hdr != id {
		return "", fmt.Errorf("%w: body %q disagrees with its %s header", ErrInvalidDeliveryID, id, jetstream.MsgIDHeader)
	}
	return id, nil
}
