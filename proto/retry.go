package proto

import (
	"fmt"
	"math"
	"time"
)

// Retry policy defaults, used for every field a subscription leaves null.
const (
	DefaultMaxRetries        = 5
	DefaultInitialDelayMs    = 1000
	DefaultBackoffMultiplier = 2.0
	DefaultMaxDelayMs        = 60000
)

// RetryPolicy is a subscription's retry_policy. Each nil field takes its
// default, exactly as the reference service resolves it.
type RetryPolicy struct {
	MaxRetries        *int     `json:"max_retries,omitempty"`
	InitialDelayMs    *int64   `json:"initial_delay_ms,omitempty"`
	BackoffMultiplier *float64 `json:"backoff_multiplier,omitempty"`
	MaxDelayMs        *int64   `json:"max_delay_ms,omitempty"`
}

// Retries is max_retries with its default: the number of retries after the
// first attempt, so a delivery is sent at most Retries()+1 times.
func (p RetryPolicy) Retries() int {
	if p.MaxRetries == nil {
		return DefaultMaxRetries
	}
	return *p.MaxRetries
}

// Exhausted reports whether a delivery that has now failed its attempts-th
// send (attempts counts that send) gets no further retry:
// attempts > max_retries.
func (p RetryPolicy) Exhausted(attempts int) bool { return attempts > p.Retries() }

// MaxRetryDelay caps Delay. Admin only accepts max_delay_ms up to one hour,
// but other writers are not bound by that, and a max_delay_ms near the int64
// range would overflow time.Duration (about 292 years) into a negative
// wait. Thirty days is far beyond any delivery's life (MAX_DELIVERY_AGE_MS
// defaults to 24 h), so the cap changes no real schedule.
const MaxRetryDelay = 30 * 24 * time.Hour

// Delay is the wait before the retry that follows failed attempt number
// attempts (1-based): min(initial × multiplier^(attempts−1), max), computed in
// double precision and truncated toward zero as the reference does.
// The result is never negative (where the reference would compute a
// negative or NaN delay it retries at once) and never above MaxRetryDelay.
func (p RetryPolicy) Delay(attempts int) time.Duration {
	initial := float64(DefaultInitialDelayMs)
	if p.InitialDelayMs != nil {
		initial = float64(*p.InitialDelayMs)
	}
	mult := DefaultBackoffMultiplier
	if p.BackoffMultiplier != nil {
		mult = *p.BackoffMultiplier
	}
	maxMs := int64(DefaultMaxDelayMs)
	if p.MaxDelayMs != nil {
		maxMs = *p.MaxDelayMs
	}
	maxMs = min(maxMs, MaxRetryDelay.Milliseconds())
	if attempts < 1 {
		attempts = 1
	}
	raw := initial * math.Pow(mult, float64(attempts-1))
	// Java's (long) cast saturates; Go's float→int conversion does not, so
	// anything at or beyond the cap (including +Inf) is resolved before it.
	var ms int64
	switch {
	case math.IsNaN(raw) || raw <= 0 || maxMs <= 0:
		ms = 0
	case raw >= float64(maxMs):
		ms = maxMs
	default:
		ms = int64(raw)
	}
	return time.Duration(ms) * time.Millisecond
}

// ExpiredMessage is the reference's error_message for a delivery failed
// without a send at the stale cutoff (MAX_DELIVERY_AGE_MS): its age and the
// cutoff in whole hours.
func ExpiredMessage(age, maxAge time.Duration) string {
	return fmt.Sprintf("Delivery expired: %dh old (max %dh)", age/time.Hour, maxAge/time.Hour)
}
