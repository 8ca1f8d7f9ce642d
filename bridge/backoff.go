package bridge

import (
	"context"
	"time"
)

// Bounds of the capped exponential backoff used whenever Redis or JetStream
// refuses: quick enough to recover from a blip, slow enough not to hammer a
// server that is down.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// backoff doubles from minBackoff up to maxBackoff. The zero value is ready.
type backoff struct{ next time.Duration }

func (b *backoff) step() time.Duration {
	d := max(b.next, minBackoff)
	b.next = min(2*d, maxBackoff)
	return d
}

func (b *backoff) reset() { b.next = 0 }

// sleep waits d or until ctx is done, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
