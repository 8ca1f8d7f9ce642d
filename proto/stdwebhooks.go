package proto

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header names of Standard Webhooks (standardwebhooks.com), lowercase as the
// specification writes them. jetrelay sends them, when a subscription opts
// in, beside X-Cycles-Signature, which stays as it is.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// StandardWebhooksTolerance is how far a webhook-timestamp may be from the
// receiver's clock, either way, before the request is refused as a replay:
// the specification's and its libraries' default.
const StandardWebhooksTolerance = 5 * time.Minute

// secretPrefix marks a Standard Webhooks secret: the key follows, base64.
const secretPrefix = "whsec_"

// maxSignatures bounds how many signatures one webhook-signature header may
// carry before a verifier stops reading it: a sender carries two during a
// rotation, a forged header thousands only to burn the receiver's CPU.
const maxSignatures = 16

// Errors of VerifyStandardWebhooks.
var (
	// ErrWebhookHeadersMissing: webhook-id, webhook-timestamp or
	// webhook-signature is absent or empty.
	ErrWebhookHeadersMissing = errors.New("proto: webhook-id, webhook-timestamp or webhook-signature missing")
	// ErrWebhookTimestamp: webhook-timestamp is not a Unix time in seconds,
	// or is outside the tolerance (a replay, or a clock far off).
	ErrWebhookTimestamp = errors.New("proto: webhook-timestamp is invalid or outside the tolerance")
	// ErrWebhookSignature: no v1 signature in webhook-signature matches.
	ErrWebhookSignature = errors.New("proto: webhook-signature does not match")
)

// StandardWebhooksKey is the HMAC key of a subscription's signing secret
// under Standard Webhooks:
//
//   - "whsec_" followed by base64 (the specification's form): the decoded
//     bytes. Both alphabets are read, padded or not, because admin generates
//     "whsec_" + unpadded base64url of 32 random bytes: the key is those 32
//     bytes.
//   - anything else (a secret a user chose, "whsec_" with nothing or no
//     base64 after it): the secret's own UTF-8 bytes, the key
//     X-Cycles-Signature uses. Receivers pass such a secret to their library
//     in raw form (standardwebhooks' {format: "raw"}, NewWebhookRaw), or
//     StandardWebhooksSecret's form to any library.
//
// Every secret is a key: a subscription that opts in is never sent unsigned.
func StandardWebhooksKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, secretPrefix); ok {
		if key, err := decodeAnyBase64(rest); err == nil && len(key) > 0 {
			return key
		}
	}
	return []byte(secret)
}

// StandardWebhooksSecret is secret in the form every Standard Webhooks
// library reads by default: "whsec_" + padded standard base64 of
// StandardWebhooksKey(secret). A receiver handed admin's base64url secret,
// or a secret a user chose, gives its library this instead.
func StandardWebhooksSecret(secret string) string {
	return secretPrefix + base64.StdEncoding.EncodeToString(StandardWebhooksKey(secret))
}

// decodeAnyBase64 reads standard or URL-safe base64, padded or not, and
// nothing else (no whitespace, no mixed padding in the middle).
func decodeAnyBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "+/") && strings.ContainsAny(s, "-_") {
		return nil, base64.CorruptInputError(0)
	}
	s = strings.NewReplacer("-", "+", "_", "/").Replace(s)
	return base64.RawStdEncoding.Strict().DecodeString(s)
}

// SignStandardWebhooks is one signature of webhook-signature: "v1," +
// base64 of HMAC-SHA256(key, id + "." + timestamp + "." + body), timestamp
// in Unix seconds.
func SignStandardWebhooks(key []byte, id string, timestamp int64, body []byte) string {
	sum := standardWebhooksMAC(key, id, strconv.FormatInt(timestamp, 10), body)
	return "v1," + base64.StdEncoding.EncodeToString(sum)
}

func standardWebhooksMAC(key []byte, id, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// StandardWebhooksSignatures is the webhook-signature value for keys: one
// "v1," signature per key, space-separated, the current secret's first. A
// verifier accepts the request when any one matches, so during a rotation a
// receiver holding either secret verifies it.
func StandardWebhooksSignatures(keys [][]byte, id string, timestamp int64, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = SignStandardWebhooks(k, id, timestamp, body)
	}
	return strings.Join(sigs, " ")
}

// ParseWebhookTimestamp reads webhook-timestamp: decimal Unix seconds, no
// sign, no spaces, at most 12 digits (past the year 33000).
func ParseWebhookTimestamp(s string) (time.Time, error) {
	if s == "" || len(s) > 12 {
		return time.Time{}, ErrWebhookTimestamp
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, ErrWebhookTimestamp
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, ErrWebhookTimestamp
	}
	return time.Unix(n, 0), nil
}

// ParseWebhookSignatures returns the base64 parts of the "v1," entries of a
// webhook-signature header, at most maxSignatures of them. Entries of other
// versions (v1a, v2: asymmetric or future schemes) and malformed ones are
// skipped, as the specification asks.
func ParseWebhookSignatures(header string) []string {
	var out []string
	for _, entry := range strings.Fields(header) {
		if len(out) == maxSignatures {
			break
		}
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" || sig == "" {
			continue
		}
		out = append(out, sig)
	}
	return out
}

// VerifyStandardWebhooks checks a Standard Webhooks request: all three
// headers present, the timestamp within tolerance of now (either way; 0
// means StandardWebhooksTolerance), and one v1 signature made with one of
// keys over id.timestamp.body. It returns nil, ErrWebhookHeadersMissing,
// ErrWebhookTimestamp or ErrWebhookSignature. Every candidate is compared
// in constant time, whichever matches.
func VerifyStandardWebhooks(keys [][]byte, id, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	if id == "" || timestamp == "" || signature == "" {
		return ErrWebhookHeadersMissing
	}
	if tolerance <= 0 {
		tolerance = StandardWebhooksTolerance
	}
	ts, err := ParseWebhookTimestamp(timestamp)
	if err != nil {
		return err
	}
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return ErrWebhookTimestamp
	}
	ok := 0
	for _, k := range keys {
		want := []byte(base64.StdEncoding.EncodeToString(standardWebhooksMAC(k, id, timestamp, body)))
		for _, sig := range ParseWebhookSignatures(signature) {
			if hmac.Equal(want, []byte(sig)) {
				ok = 1
			}
		}
	}
	if ok == 0 {
		return ErrWebhookSignature
	}
	return nil
}
