package proto

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// traceparentLen is the length of a version-00 traceparent:
// "00-" + 32 + "-" + 16 + "-" + 2.
const traceparentLen = 55

// DefaultTraceFlags is the flags field sent when no valid inbound sampling
// decision is known: sampled.
const DefaultTraceFlags = "01"

// Traceparent is a parsed W3C Trace Context traceparent header (version 00).
type Traceparent struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// ParseTraceparent reads a version-00 traceparent strictly: exactly
// 00-<32 hex>-<16 hex>-<2 hex>, lowercase only, with non-zero trace and span
// ids. Other versions are refused rather than guessed at: nothing in the
// Cycles services writes them, and a refused header just starts a new trace.
func ParseTraceparent(s string) (Traceparent, error) {
	var tp Traceparent
	if len(s) != traceparentLen {
		return tp, fmt.Errorf("proto: traceparent must be %d characters, got %d", traceparentLen, len(s))
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return tp, errors.New("proto: traceparent fields must be separated by '-'")
	}
	if s[:2] != "00" {
		return tp, fmt.Errorf("proto: traceparent version %s is not supported (only 00)", strconv.Quote(s[:2]))
	}
	if !decodeLowerHex(tp.TraceID[:], s[3:35]) {
		return tp, errors.New("proto: traceparent trace-id must be 32 lowercase hex digits")
	}
	if !decodeLowerHex(tp.SpanID[:], s[36:52]) {
		return tp, errors.New("proto: traceparent parent-id must be 16 lowercase hex digits")
	}
	var flags [1]byte
	if !decodeLowerHex(flags[:], s[53:]) {
		return tp, errors.New("proto: traceparent flags must be 2 lowercase hex digits")
	}
	tp.Flags = flags[0]
	if allZero(tp.TraceID[:]) {
		return tp, errors.New("proto: traceparent trace-id must not be all zeros")
	}
	if allZero(tp.SpanID[:]) {
		return tp, errors.New("proto: traceparent parent-id must not be all zeros")
	}
	return tp, nil
}

// String renders the header value: 00-<trace-id>-<parent-id>-<flags>.
func (tp Traceparent) String() string {
	return BuildTraceparent(
		hex.EncodeToString(tp.TraceID[:]),
		hex.EncodeToString(tp.SpanID[:]),
		hex.EncodeToString([]byte{tp.Flags}),
	)
}

// BuildTraceparent joins already valid parts into a version-00 header
// value. It does not validate them; OutboundTrace and String only pass
// parts that are.
func BuildTraceparent(traceID, spanID, flags string) string {
	return "00-" + traceID + "-" + spanID + "-" + flags
}

// ValidTraceID is the reference's check on an event's trace_id,
// ^[0-9a-f]{32}$. Like the reference it accepts the all-zero id, which W3C
// calls invalid: changing that would change which X-Cycles-Trace-Id a
// receiver sees for the same stored event.
func ValidTraceID(s string) bool { return len(s) == 32 && isLowerHex(s) }

// ValidTraceFlags is the reference's check on a delivery's trace_flags,
// ^[0-9a-f]{2}$.
func ValidTraceFlags(s string) bool { return len(s) == 2 && isLowerHex(s) }

// NewTraceID returns a fresh random 32-hex trace id, never all zeros.
func NewTraceID() string { return randomHexID(16) }

// NewSpanID returns a fresh random 16-hex span id, never all zeros.
func NewSpanID() string { return randomHexID(8) }

// OutboundTrace picks the X-Cycles-Trace-Id and traceparent of one delivery
// attempt exactly as the reference does: the event's trace_id when it is
// well formed, otherwise a fresh one; a fresh span id every attempt; and the
// delivery's trace_flags only when admin recorded a valid inbound
// traceparent, otherwise "01".
func OutboundTrace(eventTraceID string, d *Delivery) (traceID, traceparent string) {
	traceID = eventTraceID
	if !ValidTraceID(traceID) {
		traceID = NewTraceID()
	}
	return traceID, BuildTraceparent(traceID, NewSpanID(), InboundTraceFlags(d))
}

// InboundTraceFlags is the flags field a delivery's traceparent carries:
// the sampling decision admin saw on the inbound request when that request
// had a valid traceparent, otherwise DefaultTraceFlags.
func InboundTraceFlags(d *Delivery) string {
	if d != nil && d.TraceparentInboundValid != nil && *d.TraceparentInboundValid && ValidTraceFlags(d.TraceFlags) {
		return d.TraceFlags
	}
	return DefaultTraceFlags
}

func randomHexID(n int) string {
	b := make([]byte, n)
	for {
		// crypto/rand.Read never fails (it aborts the program instead).
		_, _ = rand.Read(b)
		if !allZero(b) {
			return hex.EncodeToString(b)
		}
	}
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeLowerHex fills dst from s, which must be exactly 2*len(dst)
// lowercase hex digits (encoding/hex also accepts upper case).
func decodeLowerHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) || !isLowerHex(s) {
		return false
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
