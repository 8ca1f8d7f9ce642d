package proto_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// The specification's own vector (standard-webhooks libraries' "sign
// function works" test, in every language).
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specPayload   = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestStandardWebhooks_SignsTheSpecificationVector(t *testing.T) {
	got := proto.SignStandardWebhooks(proto.StandardWebhooksKey(specSecret), specID, specTimestamp, []byte(specPayload))
	if got != specSignature {
		t.Fatalf("signature = %s, want %s", got, specSignature)
	}
}

func TestStandardWebhooks_VerifiesTheSpecificationCases(t *testing.T) {
	key := [][]byte{proto.StandardWebhooksKey(specSecret)}
	now := time.Unix(specTimestamp, 0)
	bad := "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	cases := []struct {
		name, id, ts, sig string
		now               time.Time
		want              error
	}{
		{"valid", specID, "1614265330", specSignature, now, nil},
		{"multi signature with other versions", specID, "1614265330", bad + " v2," + specSignature[3:] + " " + specSignature + " " + bad, now, nil},
		{"missing id", "", "1614265330", specSignature, now, proto.ErrWebhookHeadersMissing},
		{"missing timestamp", specID, "", specSignature, now, proto.ErrWebhookHeadersMissing},
		{"missing signature", specID, "1614265330", "", now, proto.ErrWebhookHeadersMissing},
		{"invalid signature", specID, "1614265330", bad, now, proto.ErrWebhookSignature},
		{"partial signature", specID, "1614265330", "v1,", now, proto.ErrWebhookSignature},
		{"truncated signature", specID, "1614265330", specSignature[:8], now, proto.ErrWebhookSignature},
		{"only another version", specID, "1614265330", "v2," + specSignature[3:], now, proto.ErrWebhookSignature},
		{"non-numeric timestamp", specID, "hello", specSignature, now, proto.ErrWebhookTimestamp},
		{"old timestamp (replay)", specID, "1614265330", specSignature, now.Add(5*time.Minute + time.Second), proto.ErrWebhookTimestamp},
		{"new timestamp", specID, "1614265330", specSignature, now.Add(-5*time.Minute - time.Second), proto.ErrWebhookTimestamp},
		{"other id", "msg_other", "1614265330", specSignature, now, proto.ErrWebhookSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := proto.VerifyStandardWebhooks(key, c.id, c.ts, c.sig, []byte(specPayload), c.now, 0)
			if !errors.Is(err, c.want) {
				t.Fatalf("VerifyStandardWebhooks = %v, want %v", err, c.want)
			}
		})
	}
}

func TestStandardWebhooksKey_FollowsTheDocumentedRule(t *testing.T) {
	raw32 := bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 11)[:32] // encodes with - and _ in base64url
	cases := []struct {
		name, secret string
		want         []byte
	}{
		{"spec: whsec_ + standard base64", specSecret, mustStd(t, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")},
		{"admin's generated whsec_ + unpadded base64url", "whsec_" + base64.RawURLEncoding.EncodeToString(raw32), raw32},
		{"padded standard base64", "whsec_" + base64.StdEncoding.EncodeToString(raw32), raw32},
		{"a secret a user chose: its own bytes", "my-shared-secret", []byte("my-shared-secret")},
		{"whsec_ with no base64 after it: its own bytes", "whsec_not base64!", []byte("whsec_not base64!")},
		{"whsec_ alone: its own bytes", "whsec_", []byte("whsec_")},
		{"mixed alphabets: its own bytes", "whsec_ab+-", []byte("whsec_ab+-")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := proto.StandardWebhooksKey(c.secret); !bytes.Equal(got, c.want) {
				t.Fatalf("key = %x, want %x", got, c.want)
			}
			// The canonical form names the same key to any library.
			canon := proto.StandardWebhooksSecret(c.secret)
			if got := proto.StandardWebhooksKey(canon); !bytes.Equal(got, c.want) {
				t.Fatalf("canonical %s names key %x, want %x", canon, got, c.want)
			}
		})
	}
}

func TestStandardWebhooksSignatures_EitherSecretVerifiesDuringARotation(t *testing.T) {
	oldKey, newKey := proto.StandardWebhooksKey("whsec_b2xk"), proto.StandardWebhooksKey("whsec_bmV3")
	body := []byte(`{"event_id":"evt_1"}`)
	header := proto.StandardWebhooksSignatures([][]byte{newKey, oldKey}, "evt_1", 1700000000, body)
	now := time.Unix(1700000000, 0)
	for name, k := range map[string][]byte{"old": oldKey, "new": newKey} {
		if err := proto.VerifyStandardWebhooks([][]byte{k}, "evt_1", "1700000000", header, body, now, 0); err != nil {
			t.Errorf("a receiver with only the %s secret: %v", name, err)
		}
	}
	if err := proto.VerifyStandardWebhooks([][]byte{[]byte("third")}, "evt_1", "1700000000", header, body, now, 0); !errors.Is(err, proto.ErrWebhookSignature) {
		t.Errorf("a receiver with neither secret: %v, want ErrWebhookSignature", err)
	}
}

func mustStd(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A settings record whose previous secret was dropped (fields written as
// null by a patch) reads as having none.
func TestParseSubscriptionSettings_ReadsADroppedPreviousSecretAsNone(t *testing.T) {
	set, err := proto.ParseSubscriptionSettings([]byte(`{"standard_webhooks":true,"secret":"enc:x","previous_secret":null,"previous_secret_until":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if set.StandardWebhooks == nil || !*set.StandardWebhooks || set.Secret != "enc:x" || set.PreviousSecret != "" || set.PreviousSecretUntil != nil {
		t.Fatalf("parsed %+v", set)
	}
}
