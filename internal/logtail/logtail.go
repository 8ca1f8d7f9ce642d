// Package logtail keeps the last bytes a child process wrote, so that a
// failed start or an early exit can say why without unbounded memory.
package logtail

import (
	"strings"
	"sync"
)

// Tail is an io.Writer that keeps the last Max bytes written to it. It is
// safe for concurrent use (a child's stdout and stderr may share one).
type Tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

// New returns a Tail keeping at most max bytes.
func New(max int) *Tail { return &Tail{max: max} }

// Write implements io.Writer; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns what is kept, without surrounding white space.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// Reset forgets everything written so far.
func (t *Tail) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = t.buf[:0]
}
