package webhook

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// errBodyReleased is what net/http reads from a request body after Deliver
// returned; only a connection that is being torn down still reads then.
var errBodyReleased = errors.New("webhook: request body released")

// copiedBodyMax is the largest body Deliver copies rather than lends: a copy
// of a typical event (about a kilobyte) costs less than the extra write and
// packet that a lent body's separately flushed headers cost, and a copy
// needs no lease; a body of megabytes is lent, not copied on every attempt.
const copiedBodyMax = 64 << 10

// bodyLease lends the caller's body bytes to net/http for one Deliver call
// when the body is too large to copy (copiedBodyMax).
// net/http reads a request body on its connection's write goroutine, with
// nothing ordering those reads before RoundTrip returns (RoundTripper's
// contract allows reading after it; the race detector shows it when a
// receiver answers before reading a large body). Deliver promises not to
// retain req.Body once it returns, so release waits for a read in progress
// and makes later reads fail.
type bodyLease struct {
	mu       sync.Mutex
	body     []byte
	released bool
}

// reader returns a fresh reader over the body; net/http calls it again
// (through Request.GetBody) to resend on a kept-alive connection the server
// had closed.
func (l *bodyLease) reader() io.ReadCloser {
	return &leasedReader{lease: l, r: bytes.NewReader(l.body)}
}

func (l *bodyLease) release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
}

type leasedReader struct {
	lease *bodyLease
	r     *bytes.Reader
}

func (lr *leasedReader) Read(p []byte) (int, error) {
	lr.lease.mu.Lock()
	defer lr.lease.mu.Unlock()
	if lr.lease.released {
		return 0, errBodyReleased
	}
	return lr.r.Read(p)
}

func (lr *leasedReader) Close() error { return nil }
