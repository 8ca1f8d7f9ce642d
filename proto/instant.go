package proto

import (
	"fmt"
	"strconv"
	"time"
)

// FormatInstant renders t exactly as Java's Instant.toString() does, which is
// how every Cycles service writes timestamps: UTC, a literal Z, and a
// fraction printed in groups of three digits only when it is non-zero
// (2026-04-01T12:00:00Z, …00.100Z, …00.123456Z, …00.123456789Z).
// Go's RFC3339Nano trims trailing zeros (.1Z) and so cannot be used.
func FormatInstant(t time.Time) string {
	return string(AppendInstant(make([]byte, 0, 30), t))
}

// AppendInstant appends the FormatInstant form of t to b.
func AppendInstant(b []byte, t time.Time) []byte {
	t = t.UTC()
	b = t.AppendFormat(b, "2006-01-02T15:04:05")
	ns := t.Nanosecond()
	switch {
	case ns == 0:
	case ns%1_000_000 == 0:
		b = appendFraction(b, ns/1_000_000, 3)
	case ns%1_000 == 0:
		b = appendFraction(b, ns/1_000, 6)
	default:
		b = appendFraction(b, ns, 9)
	}
	return append(b, 'Z')
}

func appendFraction(b []byte, v, width int) []byte {
	b = append(b, '.')
	var digits [9]byte
	for i := width - 1; i >= 0; i-- {
		digits[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, digits[:width]...)
}

// ParseInstant reads an ISO-8601 instant as Jackson's InstantDeserializer
// accepts it from these services: a UTC or offset date-time with any number
// of fractional digits (0–9), whose UTC year has four digits.
func ParseInstant(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("proto: invalid instant %s: %w", strconv.Quote(s), err)
	}
	t = t.UTC()
	// An offset can push a four-digit year out of range (9999-12-31T23:00:00-02:00);
	// such an instant could not be written back in the form it was read.
	if y := t.Year(); y < 0 || y > 9999 {
		return time.Time{}, fmt.Errorf("proto: instant %s is outside years 0000-9999 in UTC", strconv.Quote(s))
	}
	return t, nil
}

// MillisInstant truncates t to the millisecond, the precision the reference
// service writes next_retry_at with (Instant.ofEpochMilli).
func MillisInstant(t time.Time) time.Time { return t.Truncate(time.Millisecond) }
