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
// new one. A renewal is one small publish and one purge request.
const keepEvery = 250 * time.Millisecond

// keepLoop keeps the dispatch stream from being empty between deliveries
// (queue.Keep explains why) until ctx ends. It renews the keeper only when
// this bridge published since the last renewal and its last move emptied
// dispatch:pending: then the stream is about to be emptied by the engines'
// acks, and the renewal lands behind everything queued, in the newest
// block. While the bridge moves a backlog in full batches the stream is
// not about to be empty, and renewing would only make the store load old
// blocks to remove old keepers (about 10 MiB more peak memory in a drain of
// 100,000 deliveries); the renewal after the backlog does it once. An idle
// queue costs nothing. A failed renewal is only slower storage: it is
// logged at debug level and tried again at the next tick.
func (b *Bridge) keepLoop(ctx context.Context) {
	t := time.NewTicker(keepEvery)
	defer t.Stop()
	var (
		st   jetstream.Stream
		kept bool
		seen uint64
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		published := b.published.Load() + b.requeued.Load()
		if (kept && published == seen) || !b.caughtUp.Load() {
			continue
		}
		kctx, cancel := context.WithTimeout(ctx, b.cfg.PublishTimeout)
		err := b.keep(kctx, &st)
		cancel()
		if err != nil {
			st = nil // the stream may have been recreated: look it up again
			b.log.Debug("dispatch stream keeper not renewed", "err", err)
			continue
		}
		kept, seen = true, published
	}
}

// keep renews the keeper, looking the stream up once.
func (b *Bridge) keep(ctx context.Context, st *jetstream.Stream) error {
	if *st == nil {
		s, err := b.js.Stream(ctx, b.cfg.Queue.Stream)
		if err != nil {
			return err
		}
		*st = s
	}
	return queue.Keep(ctx, b.js, *st, b.cfg.Queue)
}
