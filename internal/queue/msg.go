package queue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	return newMsg(subject, deliveryID, deliveryID)
}

// requeueSep joins a delivery id and a stream sequence in a requeue's
// Nats-Msg-Id. Delivery ids may contain it; DeliveryID checks a header
// against the body, so that is never ambiguous.
const requeueSep = "#r"

// RequeueMsgID is the Nats-Msg-Id that re-enqueues deliveryID after the
// message at sequence replaced, which JetStream still remembers under the
// id's own msg id, was consumed: "<deliveryID>#r<replaced>". It differs from
// the plain id, so the dedupe window lets the re-enqueue through; it is
// derived from the consumed message rather than the clock, so republishing
// the same re-enqueue after a crash is still absorbed.
func RequeueMsgID(deliveryID string, replaced uint64) string {
	return deliveryID + requeueSep + strconv.FormatUint(replaced, 10)
}

// NewRequeueMsg builds a work item for deliveryID whose Nats-Msg-Id is
// RequeueMsgID(deliveryID, replaced); the body is the delivery id, as in
// NewMsg.
func NewRequeueMsg(subject, deliveryID string, replaced uint64) *nats.Msg {
	return newMsg(subject, deliveryID, RequeueMsgID(deliveryID, replaced))
}

// deferSep separates a delivery id from a due time in the Nats-Msg-Id
// "<deliveryID>#d<dueMillis>" an older bridge gave deliveries it brought back
// from jetrelay:deferred. Nothing writes it any more; work items published
// that way before an upgrade are still accepted.
const deferSep = "#d"

func newMsg(subject, deliveryID, msgID string) *nats.Msg {
	return &nats.Msg{
		Subject: subject,
		Data:    []byte(deliveryID),
		Header:  nats.Header{jetstream.MsgIDHeader: []string{msgID}},
	}
}

// DeliveryID extracts and validates the delivery id of a work item. Its
// Nats-Msg-Id, when present, must be the id itself, a RequeueMsgID or an
// older bridge's deferral id of it (deferSep); anything else means the item was not built here.
func DeliveryID(m jetstream.Msg) (string, error) {
	id := string(m.Data())
	if err := ValidateDeliveryID(id); err != nil {
		return "", err
	}
	if hdr := m.Headers().Get(jetstream.MsgIDHeader); hdr != "" && hdr != id && !isSuffixedMsgID(hdr, id, requeueSep) && !isSuffixedMsgID(hdr, id, deferSep) {
		return "", fmt.Errorf("%w: body %q disagrees with its %s header", ErrInvalidDeliveryID, id, jetstream.MsgIDHeader)
	}
	return id, nil
}

// isSuffixedMsgID reports whether msgID is exactly id+sep+n for some
// plainly written non-negative number n (RequeueMsgID, DeferredMsgID).
func isSuffixedMsgID(msgID, id, sep string) bool {
	seq, ok := strings.CutPrefix(msgID, id+sep)
	if !ok {
		return false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	return err == nil && strconv.FormatUint(n, 10) == seq
}
