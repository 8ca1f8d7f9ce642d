package receive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/jetrelay/jetrelay/proto"
)

// Middleware verifies every request before next sees it. It reads at most
// the body limit (WithMaxBodyBytes) and answers 413 past it, 401 to a missing
// or wrong signature (either scheme, VerifyIdentity) or a replayed
// Standard Webhooks timestamp, and otherwise calls next with the body restored, byte
// for byte, so next may parse it. Nothing is parsed before the signature
// holds.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, status := readBounded(w, r, v.maxBody)
		if status != 0 {
			http.Error(w, http.StatusText(status), status)
			return
		}
		if err := v.VerifyIdentity(body, IdentityFromHTTP(r.Header)); err != nil {
			http.Error(w, "invalid or missing signature (X-Cycles-Signature or webhook-signature), or a stale webhook-timestamp", http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// ReadBody reads r's body up to limit bytes. It returns the body and 0, or
// the status to answer: 413 when the body is larger than limit, 400 when it
// cannot be read.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int) {
	return readBounded(w, r, limit)
}

func readBounded(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int) {
	if r.ContentLength > limit {
		return nil, http.StatusRequestEntityTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, http.StatusRequestEntityTooLarge
	case err != nil:
		return nil, http.StatusBadRequest
	}
	return body, 0
}

// BusyRetryAfter is the Retry-After (seconds) of the 503 that answers a
// delivery whose event another request is processing right now.
const BusyRetryAfter = 5

// Middleware runs next at most once per X-Cycles-Event-Id. A request without
// a usable event id is answered 400; a duplicate of a processed event 200
// with no call to next; a delivery of an event being processed elsewhere 503
// with Retry-After; a store failure 503. When next answers 2xx the event is
// done; any other status (or a panic) releases the claim so the sender's
// retry is processed. Put it after Verifier.Middleware: an unverified id must
// not claim anything.
func (d *Deduper) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(proto.HeaderEventID)
		if !ValidEventID(id) {
			http.Error(w, "missing or invalid X-Cycles-Event-Id", http.StatusBadRequest)
			return
		}
		rec := &statusWriter{ResponseWriter: w}
		outcome, err := d.Do(r.Context(), id, func(context.Context) error {
			next.ServeHTTP(rec, r)
			if rec.status == 0 {
				rec.status = http.StatusOK // nothing written: net/http answers 200
			}
			if rec.status < 200 || rec.status > 299 {
				return errHandlerStatus
			}
			return nil
		})
		switch {
		case outcome == Duplicate:
			w.WriteHeader(http.StatusOK)
		case outcome == Busy:
			w.Header().Set("Retry-After", strconv.Itoa(BusyRetryAfter))
			http.Error(w, "this event is being processed; retry later", http.StatusServiceUnavailable)
		case outcome == 0 && err != nil:
			w.Header().Set("Retry-After", strconv.Itoa(BusyRetryAfter))
			http.Error(w, "deduplication store unavailable", http.StatusServiceUnavailable)
		}
		// Processed and Failed: next has answered already.
	})
}

// errHandlerStatus marks a handler that answered other than 2xx, so Do
// releases the claim.
var errHandlerStatus = errors.New("receive: handler answered a non-2xx status")

// statusWriter remembers the status next wrote, so the claim can be
// completed or released by it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
