package receive_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// A receiver migrating from X-Cycles-Signature to Standard Webhooks: while
// both are accepted, a sender that has not switched and one that has both
// get through; a captured Standard Webhooks request replayed past the
// tolerance does not, even though its X-Cycles-Signature (no timestamp)
// still matches; at the end of the migration X-Cycles-Signature alone is
// refused.
func TestVerifierMiddleware_AcceptsEitherSchemeDuringAMigrationAndRefusesReplays(t *testing.T) {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"event_id":"evt_1","event_type":"budget.exhausted"}`)
	now := time.Unix(1700000000, 0)
	clock := func() time.Time { return now }
	stdHeaders := func(at time.Time) http.Header {
		h := http.Header{}
		h.Set(proto.HeaderEventID, "evt_1")
		h.Set(proto.HeaderSignature, proto.Sign(secret, body))
		h.Set(proto.HeaderWebhookID, "evt_1")
		h.Set(proto.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
		h.Set(proto.HeaderWebhookSignature, proto.SignStandardWebhooks(proto.StandardWebhooksKey(secret), "evt_1", at.Unix(), body))
		return h
	}
	cyclesOnly := http.Header{}
	cyclesOnly.Set(proto.HeaderEventID, "evt_1")
	cyclesOnly.Set(proto.HeaderSignature, proto.Sign(secret, body))
	forged := stdHeaders(now)
	forged.Set(proto.HeaderWebhookSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")

	migrating, err := receive.NewVerifier([]string{secret}, receive.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	done, err := receive.NewVerifier([]string{secret}, receive.WithClock(clock), receive.WithStandardWebhooksOnly())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		v      *receive.Verifier
		header http.Header
		want   int
	}{
		{"migrating: X-Cycles-Signature only", migrating, cyclesOnly, http.StatusOK},
		{"migrating: Standard Webhooks", migrating, stdHeaders(now), http.StatusOK},
		{"migrating: Standard Webhooks within the tolerance", migrating, stdHeaders(now.Add(-4 * time.Minute)), http.StatusOK},
		{"migrating: replayed 6 minutes later", migrating, stdHeaders(now.Add(-6 * time.Minute)), http.StatusUnauthorized},
		{"migrating: timestamp from the future", migrating, stdHeaders(now.Add(6 * time.Minute)), http.StatusUnauthorized},
		{"migrating: forged webhook-signature beside a valid X-Cycles-Signature", migrating, forged, http.StatusUnauthorized},
		{"done: Standard Webhooks", done, stdHeaders(now), http.StatusOK},
		{"done: X-Cycles-Signature only", done, cyclesOnly, http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			called := false
			h := c.v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called = true }))
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			r.Header = c.header
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.want || called != (c.want == http.StatusOK) {
				t.Fatalf("answered %d (handler called: %v), want %d", w.Code, called, c.want)
			}
		})
	}
	if err := migrating.VerifyStandardWebhooks(body, "evt_1", strconv.FormatInt(now.Add(-time.Hour).Unix(), 10),
		stdHeaders(now.Add(-time.Hour)).Get(proto.HeaderWebhookSignature)); !errors.Is(err, receive.ErrReplay) || !errors.Is(err, receive.ErrBadSignature) {
		t.Errorf("an hour-old timestamp: %v, want ErrReplay (an ErrBadSignature)", err)
	}
}

// A message (NATS headers, SQS attributes) verifies by Standard Webhooks
// under the names the transports send.
func TestVerifyMessage_VerifiesStandardWebhooksAttributes(t *testing.T) {
	secret := "a secret a user chose"
	body := []byte(`{"event_id":"evt_2"}`)
	now := time.Now()
	v, err := receive.NewVerifier([]string{secret})
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]string{
		proto.HeaderEventID: "evt_2", proto.HeaderWebhookID: "evt_2",
		proto.HeaderWebhookTimestamp: strconv.FormatInt(now.Unix(), 10),
		proto.HeaderWebhookSignature: proto.SignStandardWebhooks(proto.StandardWebhooksKey(secret), "evt_2", now.Unix(), body),
	}
	if _, err := v.VerifyMessage(receive.AttributeMessage(body, attrs)); err != nil {
		t.Fatalf("VerifyMessage: %v", err)
	}
	attrs[proto.HeaderWebhookTimestamp] = strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10)
	if _, err := v.VerifyMessage(receive.AttributeMessage(body, attrs)); !errors.Is(err, receive.ErrReplay) {
		t.Fatalf("VerifyMessage of a replay: %v, want ErrReplay", err)
	}
}
