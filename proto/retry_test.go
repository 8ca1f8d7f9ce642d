package proto

import (
	"math"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestRetry_DefaultScheduleDoublesFromOneSecond(t *testing.T) {
	var p RetryPolicy
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w)
		}
	}
}

func TestRetry_ExhaustsAfterMaxRetriesPlusOne(t *testing.T) {
	tests := []struct {
		name     string
		policy   RetryPolicy
		attempts int
		want     bool
	}{
		{"default, 5th failure retries", RetryPolicy{}, 5, false},
		{"default, 6th failure is final", RetryPolicy{}, 6, true},
		{"max_retries 0, first failure is final", RetryPolicy{MaxRetries: ptr(0)}, 1, true},
		{"max_retries 10, 10th failure retries", RetryPolicy{MaxRetries: ptr(10)}, 10, false},
		{"max_retries 10, 11th failure is final", RetryPolicy{MaxRetries: ptr(10)}, 11, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Exhausted(tt.attempts); got != tt.want {
				t.Errorf("Exhausted(%d) = %v, want %v", tt.attempts, got, tt.want)
			}
		})
	}
}

func TestRetry_DelayMatchesReferenceArithmetic(t *testing.T) {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	tests := []struct {
		name     string
		policy   RetryPolicy
		attempts int
		want     time.Duration
	}{
		{"×1.5 attempt 1", RetryPolicy{InitialDelayMs: ptr[int64](100), BackoffMultiplier: ptr(1.5)}, 1, ms(100)},
		{"×1.5 attempt 2", RetryPolicy{InitialDelayMs: ptr[int64](100), BackoffMultiplier: ptr(1.5)}, 2, ms(150)},
		{"×1.5 attempt 3", RetryPolicy{InitialDelayMs: ptr[int64](100), BackoffMultiplier: ptr(1.5)}, 3, ms(225)},
		{"×1.5 attempt 4 truncates 337.5", RetryPolicy{InitialDelayMs: ptr[int64](100), BackoffMultiplier: ptr(1.5)}, 4, ms(337)},
		{"capped by max_delay_ms", RetryPolicy{InitialDelayMs: ptr[int64](1000), BackoffMultiplier: ptr(2.0), MaxDelayMs: ptr[int64](5000)}, 10, ms(5000)},
		{"default cap 60 s", RetryPolicy{}, 20, ms(60000)},
		{"attempt 0 treated as 1", RetryPolicy{}, 0, ms(1000)},
		{"multiplier 1 keeps the delay flat", RetryPolicy{BackoffMultiplier: ptr(1.0)}, 7, ms(1000)},
		{"huge attempt count saturates at the cap", RetryPolicy{}, math.MaxInt, ms(60000)},
		{"+Inf multiplier saturates at the cap", RetryPolicy{BackoffMultiplier: ptr(math.Inf(1))}, 2, ms(60000)},
		{"NaN multiplier retries at once", RetryPolicy{BackoffMultiplier: ptr(math.NaN())}, 2, 0},
		{"-Inf multiplier retries at once", RetryPolicy{BackoffMultiplier: ptr(math.Inf(-1))}, 2, 0},
		{"negative multiplier, odd power, retries at once", RetryPolicy{BackoffMultiplier: ptr(-2.0)}, 2, 0},
		{"negative multiplier, even power", RetryPolicy{BackoffMultiplier: ptr(-2.0)}, 3, ms(4000)},
		{"negative initial retries at once", RetryPolicy{InitialDelayMs: ptr[int64](-5)}, 1, 0},
		{"zero initial retries at once", RetryPolicy{InitialDelayMs: ptr[int64](0)}, 3, 0},
		{"negative max retries at once", RetryPolicy{MaxDelayMs: ptr[int64](-1)}, 1, 0},
		{"absurd max_delay_ms is clamped", RetryPolicy{InitialDelayMs: ptr[int64](math.MaxInt64), MaxDelayMs: ptr[int64](math.MaxInt64)}, 1, MaxRetryDelay},
		{"absurd initial with absurd max and +Inf growth", RetryPolicy{BackoffMultiplier: ptr(math.Inf(1)), MaxDelayMs: ptr[int64](math.MaxInt64)}, 3, MaxRetryDelay},
		{"max above the ceiling keeps smaller delays exact", RetryPolicy{InitialDelayMs: ptr[int64](3_600_000), MaxDelayMs: ptr[int64](math.MaxInt64)}, 1, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.policy.Delay(tt.attempts)
			if got != tt.want {
				t.Errorf("Delay(%d) = %v, want %v", tt.attempts, got, tt.want)
			}
			if got < 0 || got > MaxRetryDelay {
				t.Errorf("Delay(%d) = %v is outside [0, MaxRetryDelay]", tt.attempts, got)
			}
		})
	}
}

func TestRetry_SubscriptionDefaultsApplyPerField(t *testing.T) {
	sub, err := ParseSubscription([]byte(`{"subscription_id":"whsub_1","status":"ACTIVE","retry_policy":{"max_retries":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := sub.Policy()
	if p.Retries() != 2 || p.Delay(2) != 2*time.Second || !p.Exhausted(3) {
		t.Errorf("policy with only max_retries: retries %d, delay(2) %v, exhausted(3) %v", p.Retries(), p.Delay(2), p.Exhausted(3))
	}
	if (&Subscription{}).Policy().Retries() != DefaultMaxRetries {
		t.Errorf("subscription without retry_policy does not use defaults")
	}
}
