package bridge

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// keepEvery is how often a bridge renews its keeper in the dispatch stream
// (queue.Keep) while it keeps up with dispatch:pending: how long, at most,
// an emptied stream replaces its block file after the store moved on to a
// new one. A renewal is one purge of the bridge's keeper subject and one
// small publish.
const keepEvery = 250 * time.Millisecond

// keepBackoffMax bounds, in ticks, the wait after failed renewals (30 s).
const keepBackoffMax = 120

// keeping is the keeper loop's state.
type keeping struct {
	st    jetstream.Stream // looked up once, again after a failure
	kept  bool             // a renewal succeeded
	seen  uint64           // publishes counted at the last renewal
	fails int              // failures in a row
	skip  int              // ticks left to wait after a failure
}

// keepLoop keeps the dispatch stream from being empty between deliveries
// (internal/queue/keeper.go explains why) until ctx ends. It renews the
// keeper only when this bridge published since the last renewal and has
// caught up with dispatch:pending (its last move came back short and what
// it moved is published): then the stream is about to be emptied by the
// engines' acks, and the renewal lands behind everything queued, in the
// newest block. While the bridge moves a backlog in full batches the
// stream is not about to be empty, and renewing would only make the store
// load old blocks to remove old keepers (about 10 MiB more peak memory in
// a drain of 100,000 deliveries); the renewal after the backlog does it
// once. An idle queue costs nothing.
//
// A failed renewal is only slower storage. It is retried with a backoff
// (up to 30 s), and logged at warn level once, at the third failure in a
// row (a NATS user without the permissions docs/operations.md lists, say).
// Each renewal removes all of this bridge's keepers before it stores a
// new one, so failures never pile keepers up.
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

// tend renews the keeper when it is due (see keepLoop): it removes this
// bridge's keepers, then stores a new one.
func (b *Bridge) tend(ctx context.Context, k *keeping) error {
	published := b.published.Load() + b.requeued.Load()
	if (k.kept && published == k.seen) || !b.caughtUp.Load() {
		return nil
	}
	if k.st == nil {
		st, err := b.js.Stream(ctx, b.cfg.Queue.Stream)
		if err != nil {
			return err
		}
		k.st = st
	}
	if err := queue.DropKeepers(ctx, k.st, b.cfg.Queue, b.cfg.InstanceID); err != nil {
		return err
	}
	if err := queue.Keep(ctx, b.js, b.cfg.Queue, b.cfg.InstanceID); err != nil {
		return err
	}
	k.kept, k.seen = true, published
	return nil
}

// dropKeeper removes the keeper of owner, a bridge this one forgot
// (adoptOrphans): it stopped for good. A failure leaves one small message
// in the stream, which a hand-back removes; it is logged, not returned.
func (b *Bridge) dropKeeper(ctx context.Context, owner string) {
	st, err := b.js.Stream(ctx, b.cfg.Queue.Stream)
	if err == nil {
		err = queue.DropKeepers(ctx, st, b.cfg.Queue, owner)
	}
	if err != nil {
		b.log.Debug("keeper of a forgotten bridge not removed", "bridge", owner, "err", err)
	}
}
