package receive_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
)

const (
	oldSecret = "whsec_old"
	newSecret = "whsec_new"
	eventBody = `{"event_id":"evt-1","event_type":"tenant.created","data":{"n":1.50}}`
)

// signedRequest is a webhook request as jetrelay sends it.
func signedRequest(secret, eventID, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(body))
	r.Header.Set(proto.HeaderEventID, eventID)
	r.Header.Set(proto.HeaderEventType, "tenant.created")
	if secret != "" {
		r.Header.Set(proto.HeaderSignature, proto.Sign(secret, []byte(body)))
	}
	return r
}

// recordingHandler counts calls and keeps the body it was given.
type recordingHandler struct {
	calls  int
	body   []byte
	status int
}

func (h *recordingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.calls++
	h.body, _ = io.ReadAll(r.Body)
	if h.status != 0 {
		w.WriteHeader(h.status)
	}
}

func newVerifier(t *testing.T, opts ...receive.VerifierOption) *receive.Verifier {
	t.Helper()
	v, err := receive.NewVerifier([]string{oldSecret, newSecret}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifierMiddleware_PassesTheExactBodySignedWithEitherRotationSecret(t *testing.T) {
	for _, secret := range []string{oldSecret, newSecret} {
		h := &recordingHandler{}
		w := httptest.NewRecorder()
		newVerifier(t).Middleware(h).ServeHTTP(w, signedRequest(secret, "evt-1", eventBody))
		if w.Code != http.StatusOK || h.calls != 1 {
			t.Fatalf("secret %s: status %d, handler calls %d; want 200 and 1", secret, w.Code, h.calls)
		}
		if !bytes.Equal(h.body, []byte(eventBody)) {
			t.Fatalf("handler got body %q, want the signed bytes %q", h.body, eventBody)
		}
	}
}

func TestVerifierMiddleware_Answers401WithoutCallingTheHandlerForABadOrMissingSignature(t *testing.T) {
	cases := map[string]*http.Request{
		"unknown secret": signedRequest("whsec_attacker", "evt-1", eventBody),
		"no signature":   signedRequest("", "evt-1", eventBody),
		"body changed": func() *http.Request {
			r := signedRequest(newSecret, "evt-1", eventBody)
			r.Body = io.NopCloser(strings.NewReader(strings.Replace(eventBody, "1.50", "1.5", 1)))
			return r
		}(),
		"uppercase hex": func() *http.Request {
			r := signedRequest(newSecret, "evt-1", eventBody)
			r.Header.Set(proto.HeaderSignature, strings.ToUpper(r.Header.Get(proto.HeaderSignature)))
			return r
		}(),
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			h := &recordingHandler{}
			w := httptest.NewRecorder()
			newVerifier(t).Middleware(h).ServeHTTP(w, r)
			if w.Code != http.StatusUnauthorized || h.calls != 0 {
				t.Fatalf("status %d, handler calls %d; want 401 and 0", w.Code, h.calls)
			}
		})
	}
}

func TestVerifierMiddleware_Answers413ForABodyOverTheLimitWithOrWithoutContentLength(t *testing.T) {
	big := `{"pad":"` + strings.Repeat("x", 2048) + `"}`
	for _, chunked := range []bool{false, true} {
		r := signedRequest(newSecret, "evt-1", big)
		if chunked {
			r.ContentLength = -1
		}
		h := &recordingHandler{}
		w := httptest.NewRecorder()
		newVerifier(t, receive.WithMaxBodyBytes(1024)).Middleware(h).ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge || h.calls != 0 {
			t.Fatalf("chunked=%v: status %d, handler calls %d; want 413 and 0", chunked, w.Code, h.calls)
		}
	}
}

func TestNewVerifier_RefusesNoSecretOrABlankOne(t *testing.T) {
	for _, secrets := range [][]string{nil, {"  "}, {newSecret, ""}} {
		if _, err := receive.NewVerifier(secrets); err == nil {
			t.Fatalf("NewVerifier(%q) accepted secrets that would verify nothing", secrets)
		}
	}
}
