package proto

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Records are decoded with github.com/goccy/go-json for speed (it is on
// every delivery's path). This fuzz target holds it to encoding/json's
// verdicts: for any input, both accept or both refuse, and what they accept
// decodes to the same value.
func FuzzDecodersAgree(f *testing.F) {
	for _, s := range []string{fuzzDelivery, fuzzSubscription, fuzzEvent, `{}`, `null`, `[]`, `{"a":1}x`, `{"status":"PENDING","attempts":1.5}`,
		`{"event_id":"a","event_id":"b"}`, `{"EVENT_ID":"x"}`, "{\"event_id\":\"\xff\"}", `{"data":{"a":}}`, `{"actor":"x"}`, `{"headers":{"a":1}}`,
		`{"timestamp":"2026-04-01T12:00:00Z"}`, `{"timestamp":"2026-04-01T12:00:00\u005a"}`, `{"attempted_at":null}`, `{"event_types":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		agree(t, raw, func() any { return new(Delivery) })
		agree(t, raw, func() any { return new(Event) })
		agree(t, raw, func() any { return new(Subscription) })
	})
}

func agree(t *testing.T, raw []byte, fresh func() any) {
	t.Helper()
	fast, std := fresh(), fresh()
	fastErr := unmarshalRecord(raw, fast)
	stdErr := stdUnmarshalRecord(raw, std)
	if (fastErr == nil) != (stdErr == nil) {
		t.Fatalf("%T: decoders disagree on %q: go-json %v, encoding/json %v", fast, raw, fastErr, stdErr)
	}
	if fastErr == nil && !reflect.DeepEqual(fast, std) {
		t.Fatalf("%T: decoders disagree on %q:\ngo-json       %+v\nencoding/json %+v", fast, raw, fast, std)
	}
}

func stdUnmarshalRecord(raw []byte, v any) error {
	if err := checkObject(raw); err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
