package receive_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

// FuzzVerifierMiddleware: whatever body and signature arrive, the handler
// runs only for a body signed with one of the secrets, and sees that body
// byte for byte; nothing panics.
func FuzzVerifierMiddleware(f *testing.F) {
	f.Add([]byte(eventBody), proto.Sign(newSecret, []byte(eventBody)))
	f.Add([]byte(eventBody), proto.Sign("whsec_other", []byte(eventBody)))
	f.Add([]byte{}, "")
	f.Add([]byte("\x00\xff"), "sha256=")
	v, err := receive.NewVerifier([]string{oldSecret, newSecret}, receive.WithMaxBodyBytes(4096))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		h := &recordingHandler{}
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header[proto.HeaderSignature] = []string{sig}
		w := httptest.NewRecorder()
		v.Middleware(h).ServeHTTP(w, r)
		genuine := len(body) <= 4096 && (sig == proto.Sign(oldSecret, body) || sig == proto.Sign(newSecret, body))
		switch {
		case genuine && (h.calls != 1 || !bytes.Equal(h.body, body)):
			t.Fatalf("genuine delivery: handler calls %d, body %q", h.calls, h.body)
		case !genuine && h.calls != 0:
			t.Fatalf("handler ran for a body the secrets did not sign (status %d)", w.Code)
		}
	})
}
