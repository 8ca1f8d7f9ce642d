package bridge

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// keepEvery is how often a bridge renews the dispatch stream's keeper
// (queue.Keep) while it keeps up with dispatch:pending: how long, at most,
// an emptied stream replaces its block file after the store moved on to a
// new one. A renewal is one small publish and the removal of the keeper
// before it by its sequence.
const keepEvery = 250 * time.Millisecond

// keepBackoffMax bounds, in ticks, the wait after failed renewals (30 s).
const keepBackoffMax = 120

// keeping is the keeper loop's state.
type keeping struct {
	st    jetstream.Stream // looked up once, again after a failure
	last  uint64           // this bridge's newest keeper (0: none yet)
	stale uint64           // its previous one, still to remove (0: none)
	swept bool             // older keepers (stopped bridges') removed, once
	seen  uint64           // publishes counted at the last renewal
	fails int              // failures in a row
	skip  int              // ticks left to wait after a failure
}

// keepLoop keeps the dispatch stream from being empty between deliveries
// (queue.Keep explains why) until ctx ends. It renews the keeper only when
// this bridge published since the last renewal and has caught up with
// dispatch:pending (its last move came back short and what it moved is
// published): then the stream is about to be emptied by the engines' acks,
// and the renewal lands behind everything queued, in the newest block.
// While the bridge moves a backlog in full batches the stream is not about
// to be empty, and renewing would only make the store load old blocks to
// remove old keepers (about 10 MiB more peak memory in a drain of 100,000
// deliveries); the renewal after the backlog does it once. An idle queue
// costs nothing.
//
// A failed renewal is only slower storage. It is retried with a backoff
// (up to 30 s), and logged at warn level from the third failure in a row
// (a NATS user without the permissions docs/operations.md lists, say). A
// previous keeper that could not be removed is removed before any new one
// is published, so failures never pile keepers up.
func (b *Bridge) keepLoop(ctx context.Context) {
	t := time.NewTicker(keepEvery)
	defer t.Stop()
	var k keeping
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if k.skip > 0 {
			k.skip--
			continue
		}
		kctx, cancel := context.WithTimeout(ctx, b.cfg.PublishTimeout)
		err := b.tend(kctx, &k)
		cancel()
		if err == nil {
			if k.fails >= 3 {
				b.log.Info("dispatch stream keeper renewed again", "after_failures", k.fails)
			}
			k.fails = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		k.st = nil // the stream may have been recreated: look it up again
		k.fails++
		k.skip = min(1<<min(k.fails-1, 7), keepBackoffMax) - 1
		if k.fails == 3 {
			b.log.Warn("dispatch stream keeper not renewed; the stream's storage replaces a file whenever it empties until it is", "err", err, "failures", k.fails)
		} else {
			b.log.Debug("dispatch stream keeper not renewed", "err", err, "failures", k.fails)
		}
	}
}

// tend removes what is left to remove of this bridge's older keepers, then
// renews the keeper when it is due (see keepLoop).
func (b *Bridge) tend(ctx context.Context, k *keeping) error {
	if k.st == nil {
		st, err := b.js.Stream(ctx, b.cfg.Queue.Stream)
		if err != nil {
			return err
		}
		k.st = st
	}
	if err := b.tidy(ctx, k); err != nil {
		return err
	}
	published := b.published.Load() + b.requeued.Load()
	if (k.last != 0 && published == k.seen) || !b.caughtUp.Load() {
		return nil
	}
	seq, err := queue.Keep(ctx, b.js, b.cfg.Queue)
	if err != nil {
		return err
	}
	k.stale, k.last, k.seen = k.last, seq, published
	return b.tidy(ctx, k)
}

// tidy removes the keepers this bridge's newest one replaced: once, every
// keeper stored before it (those stopped bridges left), then its own
// previous one by its sequence.
func (b *Bridge) tidy(ctx context.Context, k *keeping) error {
	if k.last == 0 {
		return nil
	}
	if !k.swept {
		if err := queue.DropOlderKeepers(ctx, k.st, b.cfg.Queue, k.last); err != nil {
			return err
		}
		k.swept, k.stale = true, 0
	}
	if k.stale != 0 {
		if err := queue.DropKeeper(ctx, k.st, k.stale); err != nil {
			return err
		}
		k.stale = 0
	}
	return nil
}
