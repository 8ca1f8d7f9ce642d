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

// bodyLease lends the caller's body bytes to net/http for one Deliver call.
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
