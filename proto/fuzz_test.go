package proto

import (
	"encoding/json"
	"strings"
	"testing"
)

// Fuzz targets for the record and secret decoders of what other services
// write to Redis (instants and traceparent have theirs beside their tests).
// Each must turn any input into a value or an error, never a panic, and
// what it accepts must survive a round trip. The seeds are the contract's
// examples; the committed corpora under testdata/fuzz hold the cases worth
// keeping. `go tool task fuzz:short` runs each for a few seconds in CI.

const fuzzDelivery = `{"delivery_id":"del_66e435de3e733abc","subscription_id":"whsub_3f9a2c1b7d4e8f60","event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","status":"RETRYING","attempted_at":"2026-04-01T12:00:00.130211Z","completed_at":null,"attempts":1,"response_status":503,"response_time_ms":87,"error_message":"HTTP 503","next_retry_at":"2026-04-01T12:00:01.224Z","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","trace_flags":"01","traceparent_inbound_valid":false}`

const fuzzSubscription = `{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme","url":"https://hooks.example.com/cycles","event_types":["budget.exhausted"],"headers":{"X-Api-Key":"k"},"status":"ACTIVE","retry_policy":{"max_retries":5,"initial_delay_ms":1000,"backoff_multiplier":2.0,"max_delay_ms":60000},"disable_after_failures":10,"consecutive_failures":0,"created_at":"2026-04-01T12:00:00Z"}`

const fuzzEvent = `{"event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","category":"budget","timestamp":"2026-04-01T12:00:00.123Z","tenant_id":"acme","actor":{"type":"admin_on_behalf_of"},"source":"cycles-admin","data":{"amount":1.50},"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`

func FuzzParseDelivery(f *testing.F) {
	for _, s := range []string{fuzzDelivery, `{}`, `null`, `{"status":"PENDING","attempts":"1"}`, `{"status":"DONE"}`, `{"status":"PENDING","attempted_at":"2026-13-01T00:00:00Z"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := ParseDelivery(raw)
		if err != nil {
			return
		}
		if !d.Status.Known() {
			t.Fatalf("accepted unknown status %q", d.Status)
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("accepted record does not marshal: %v", err)
		}
		if _, err := ParseDelivery(again); err != nil {
			t.Fatalf("accepted record does not round-trip: %v\n%s", err, again)
		}
	})
}

func FuzzParseSubscription(f *testing.F) {
	for _, s := range []string{fuzzSubscription, `{}`, `[]`, `{"headers":{"X-A":"a\r\nX-B: b"}}`, `{"retry_policy":{"max_retries":-1,"backoff_multiplier":1e308}}`, `{"disable_after_failures":"10"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := ParseSubscription(raw)
		if err != nil {
			return
		}
		// Whatever was stored, the policy must give sane waits.
		p := s.Policy()
		for attempt := range 12 {
			if d := p.Delay(attempt); d < 0 {
				t.Fatalf("negative retry delay %s for attempt %d of %+v", d, attempt, p)
			}
		}
		_ = s.DisableAfter()
	})
}

func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{fuzzEvent, `{}`, `{"timestamp":12}`, `{"data":"x","actor":null}`, `{"event_id":"evt\u0000\r\n"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if _, err := ParseEvent(raw); err != nil {
			return
		}
	})
}

func FuzzDecryptSecret(f *testing.F) {
	key, err := ParseSecretKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd5kdFcPheIhlCI483dCw=", "enc:", "enc:AAAA", "enc:\r\n", "whsec_plain", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stored string) {
		plain, err := key.Decrypt(stored)
		if err != nil {
			if strings.Contains(err.Error(), stored) && len(stored) > len("enc:") {
				t.Fatalf("error quotes the stored value: %v", err)
			}
			return
		}
		if !strings.HasPrefix(stored, "enc:") && plain != stored {
			t.Fatalf("plaintext secret %q changed to %q", stored, plain)
		}
	})
}

func FuzzParseSecretKey(f *testing.F) {
	for _, s := range []string{"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", "c2Vrcml0LTE2LWJ5dGVzIQ==", "", "!!!!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := ParseSecretKey(s)
		if err != nil && len(s) >= 8 && strings.Contains(err.Error(), s) {
			t.Fatalf("error quotes the key: %v", err)
		}
	})
}
