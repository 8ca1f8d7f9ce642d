package store

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/sjson"

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

// sjsonApply is the field-by-field patch apply that Patch.apply replaced
// (one sjson.SetRawBytes per field): the oracle apply must match byte for
// byte.
func sjsonApply(p Patch, raw []byte) ([]byte, error) {
	out := append([]byte(nil), raw...)
	for _, f := range p {
		val, err := encodeValue(f.Value)
		if err != nil {
			return nil, err
		}
		if out, err = sjson.SetRawBytes(out, f.Name, val); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func TestPatchApply_MatchesFieldByFieldSetsByteForByte(t *testing.T) {
	at := time.Date(2026, 4, 1, 12, 5, 10, 532114000, time.UTC)
	records := []string{
		`{}`,
		`{"status":"PENDING"}`,
		`{"delivery_id":"del_1","status":"RETRYING","attempts":2,"error_message":"HTTP 503","next_retry_at":"2026-04-01T12:00:01.224Z","nested":{"status":"x"},"list":[1,{"attempts":9}]}`,
		"{ \"status\" : \"PENDING\" ,\n \"attempts\":0 }",
		`{"a\u0062":1,"status":"PENDING"}`,
	}
	patches := []Patch{
		{{"status", proto.DeliverySuccess}},
		{{"status", proto.DeliverySuccess}, {"attempts", 3}, {"completed_at", at}, {"error_message", nil}, {"next_retry_at", nil}},
		{{"brand_new", "v"}, {"another", int64(7)}},
		{{"status", proto.DeliveryRetrying}, {"status", proto.DeliveryFailed}},
		{{"ab", 2}},
	}
	for _, rec := range records {
		for _, p := range patches {
			want, err := sjsonApply(p, []byte(rec))
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.apply([]byte(rec))
			if err != nil {
				t.Fatalf("apply(%v) to %s: %v", p, rec, err)
			}
			if string(got) != string(want) {
				t.Errorf("apply(%v) to %s\n got %s\nwant %s", p, rec, got, want)
			}
		}
	}
}

func TestPatchApply_RewritesEveryCopyOfARepeatedKey(t *testing.T) {
	got, err := Patch{{"status", proto.DeliverySuccess}}.apply([]byte(`{"status":"PENDING","x":1,"status":"RETRYING"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"status":"SUCCESS","x":1,"status":"SUCCESS"}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestPatchApply_RefusesWhatIsNotAnObject(t *testing.T) {
	for _, raw := range []string{``, `null`, `[1]`, `"s"`, `{"status":`} {
		if got, err := (Patch{{"status", proto.DeliverySuccess}}).apply([]byte(raw)); err == nil {
			t.Errorf("apply to %q = %s, want an error", raw, got)
		}
	}
}
