package store

import (
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

func TestEncodeValue_WritesWhatJacksonWrites(t *testing.T) {
	at := time.Date(2026, 4, 1, 12, 5, 10, 532114000, time.UTC)
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"nil is null", nil, `null`},
		{"string keeps html and line separators raw", "a<b>&\u2028/", "\"a<b>&\u2028/\""},
		{"control characters escaped like Jackson", "x\n\x0b\"\\", `"x\n\u000B\"\\"`},
		{"int", 3, `3`},
		{"int64", int64(-9007199254740993), `-9007199254740993`},
		{"bool", true, `true`},
		{"time in Java Instant form", at, `"2026-04-01T12:05:10.532114Z"`},
		{"delivery status", proto.DeliveryRetrying, `"RETRYING"`},
		{"subscription status", proto.SubscriptionDisabled, `"DISABLED"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encodeValue(tt.value)
			if err != nil {
				t.Fatalf("encodeValue(%#v): %v", tt.value, err)
			}
			if string(got) != tt.want {
				t.Errorf("encodeValue(%#v) = %s, want %s", tt.value, got, tt.want)
			}
		})
	}
}

func TestPatchApply_RefusesValuesAndNamesItCannotWriteFaithfully(t *testing.T) {
	tests := []struct {
		name  string
		field Field
		want  string
	}{
		{"float", Field{"backoff_multiplier", 2.0}, "float64"},
		{"pointer", Field{"attempts", new(int)}, "*int"},
		{"nested path", Field{"retry_policy.max_retries", 3}, "not a plain top-level name"},
		{"wildcard", Field{"status*", "x"}, "not a plain top-level name"},
		{"empty name", Field{"", 1}, "not a plain top-level name"},
	}
	raw := []byte(`{"status":"ACTIVE"}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Patch{tt.field}.apply(raw)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("apply(%+v) error = %v, want one mentioning %q", tt.field, err, tt.want)
			}
		})
	}
}
