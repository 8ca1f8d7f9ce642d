package bridge

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// keepEvery is how often a bridge that published since the last renewal
// renews the dispatch stream's keeper (queue.Keep): how long, at most, an
// emptied stream replaces its block file after the store moved on to a new
// one. A renewal is one small publish and one purge request.
const keepEvery = 250 * time.Millisecond

// keepLoop keeps the dispatch stream from being empty between deliveries
// (queue.Keep explains why) until ctx ends. It renews the keeper only after
// this bridge published something, so an idle queue costs nothing. A failed
// renewal is only slower storage: it is logged at debug level and tried
// again at the next tick.
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
		if kept && published == seen {
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
