package inbox

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// workers claim due rows and forward them until ctx ends.
type workers struct {
	store   *Store
	fwd     Forwarder
	cfg     Config
	log     *slog.Logger
	wake    chan struct{}
	id      string // this process's claim name prefix
	metrics *metrics
}

// signal tells idle workers that intake stored something.
func (w *workers) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run starts cfg.Workers claim loops and returns when all have stopped.
func (w *workers) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range w.cfg.Workers {
		wg.Go(func() { w.loop(ctx, w.id+"/"+itoa(i)) })
	}
	wg.Wait()
}

// loop claims a batch, forwards it concurrently, records each outcome, and
// waits for intake's signal or the poll interval when nothing is due.
func (w *workers) loop(ctx context.Context, name string) {
	for ctx.Err() == nil {
		batch, err := w.store.claim(ctx, name, w.cfg.Batch, w.cfg.Lease)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Error("inbox: claim", "worker", name, "err", err)
			}
			w.idle(ctx)
			continue
		}
		if len(batch) == 0 {
			w.idle(ctx)
			continue
		}
		var wg sync.WaitGroup
		for _, e := range batch {
			wg.Go(func() { w.deliver(ctx, e) })
		}
		wg.Wait()
	}
}

func (w *workers) idle(ctx context.Context) {
	t := time.NewTimer(w.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-w.wake:
	case <-t.C:
	}
}

// deliver forwards one claimed event and records the outcome. A forward
// already started finishes (within ForwardTimeout) even when ctx ends, so a
// stopping inbox drains its in-flight forwards instead of turning them into
// failed attempts.
func (w *workers) deliver(ctx context.Context, e Event) {
	record := context.WithoutCancel(ctx)
	fctx, cancel := context.WithTimeout(record, w.cfg.ForwardTimeout)
	err := w.fwd.Forward(fctx, e)
	cancel()
	if err == nil {
		w.metrics.forwards.WithLabelValues(resultDone).Inc()
		if err := w.store.done(record, e); err != nil {
			w.log.Error("inbox: record done", "event_id", e.EventID, "err", err)
		}
		return
	}
	if rerr := w.store.fail(record, e, err.Error(), w.cfg.Backoff(e.AttemptCount), w.cfg.MaxAttempts); rerr != nil {
		w.log.Error("inbox: record failure", "event_id", e.EventID, "err", rerr)
	}
	level, result := slog.LevelWarn, resultFailed
	if e.AttemptCount >= w.cfg.MaxAttempts {
		level, result = slog.LevelError, resultDeadLetter
	}
	w.metrics.forwards.WithLabelValues(result).Inc()
	w.log.Log(ctx, level, "inbox: forward failed", "event_id", e.EventID, "attempt", e.AttemptCount, "max_attempts", w.cfg.MaxAttempts, "err", err)
}
