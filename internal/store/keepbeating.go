package store

import (
	"context"
	"log/slog"
	"time"
)

// KeepBeating calls beat every period until ctx ends: the refresh loop of
// every heartbeat key (a bridge's, an engine's). The first failure of a run
// of failures is logged as a warning with lost, which says what a missing
// heartbeat means to the rest of the fleet; the first success after it is
// logged once, so a Redis outage is two lines, not one per period.
func KeepBeating(ctx context.Context, every time.Duration, beat func(context.Context) error, log *slog.Logger, lost string) {
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := beat(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			log.Warn(lost, "err", err)
			failing = true
		case err == nil && failing:
			log.Info("heartbeat refresh works again")
			failing = false
		}
	}
}
