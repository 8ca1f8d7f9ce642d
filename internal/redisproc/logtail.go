package redisproc

import (
	"strings"
	"sync"
)

// logTail keeps the last bytes redis-server wrote, so a failed start can say
// why (port taken, bad option, unreadable AOF) without unbounded memory.
type logTail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func newLogTail(max int) *logTail { return &logTail{max: max} }

// Write implements io.Writer for the child's stdout and stderr.
func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - l.max; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(string(l.buf))
}

func (l *logTail) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = l.buf[:0]
}
