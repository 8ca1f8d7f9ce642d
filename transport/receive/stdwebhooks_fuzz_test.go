package receive_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// FuzzStandardWebhooksMiddleware: whatever webhook-id, webhook-timestamp,
// webhook-signature and body arrive, the handler runs only when one of the
// first 16 v1 signatures is the HMAC of id.timestamp.body under one of the
// secrets' keys and the timestamp is a plain decimal within 5 minutes of
// the clock; nothing panics. The oracle is written here, apart from the
// code under test.
func FuzzStandardWebhooksMiddleware(f *testing.F) {
	now := time.Unix(1700000000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	good := proto.SignStandardWebhooks(proto.StandardWebhooksKey(newSecret), "evt-1", now.Unix(), []byte(eventBody))
	f.Add([]byte(eventBody), "evt-1", ts, good)
	f.Add([]byte(eventBody), "evt-1", strconv.FormatInt(now.Unix()-301, 10), good)
	f.Add([]byte(eventBody), "evt-1", "0"+ts, "v2,x v1a,y "+good)
	f.Add([]byte{}, "", "", "")
	f.Add([]byte("\x00"), "e", "+1", "v1,,v1, v1")
	v, err := receive.NewVerifier([]string{oldSecret, newSecret}, receive.WithMaxBodyBytes(4096), receive.WithClock(func() time.Time { return now }))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, id, timestamp, sig string) {
		h := &recordingHandler{}
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header[http.CanonicalHeaderKey(proto.HeaderWebhookID)] = []string{id}
		r.Header[http.CanonicalHeaderKey(proto.HeaderWebhookTimestamp)] = []string{timestamp}
		r.Header[http.CanonicalHeaderKey(proto.HeaderWebhookSignature)] = []string{sig}
		w := httptest.NewRecorder()
		v.Middleware(h).ServeHTTP(w, r)
		genuine := len(body) <= 4096 && id != "" && fresh(timestamp, now) && signedBy(sig, id, timestamp, body, oldSecret, newSecret)
		switch {
		case genuine && (h.calls != 1 || !bytes.Equal(h.body, body)):
			t.Fatalf("genuine delivery: status %d, handler calls %d", w.Code, h.calls)
		case !genuine && h.calls != 0:
			t.Fatalf("handler ran for a delivery that is not genuine (status %d)", w.Code)
		}
	})
}

func fresh(ts string, now time.Time) bool {
	if ts == "" || len(ts) > 12 || strings.Trim(ts, "0123456789") != "" {
		return false
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	return err == nil && n >= now.Unix()-300 && n <= now.Unix()+300
}

func signedBy(header, id, ts string, body []byte, secrets ...string) bool {
	var v1 []string
	for _, e := range strings.Fields(header) {
		if s, ok := strings.CutPrefix(e, "v1,"); ok && s != "" && len(v1) < 16 {
			v1 = append(v1, s)
		}
	}
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, proto.StandardWebhooksKey(secret))
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		for _, s := range v1 {
			if s == want {
				return true
			}
		}
	}
	return false
}
