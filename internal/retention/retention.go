package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

// Config sets the pass period and the ages beyond which index members go.
type Config struct {
	Interval    time.Duration // RETENTION_CLEANUP_INTERVAL_MS; <= 0 disables
	EventTTL    time.Duration // EVENT_TTL_DAYS
	DeliveryTTL time.Duration // DELIVERY_TTL_DAYS
	Logger      *slog.Logger
}

// Run trims at once and then every cfg.Interval until ctx is done. Passes
// are idempotent, so several replicas may run it at the same time.
func Run(ctx context.Context, st *store.Store, cfg Config) {
	if cfg.Interval <= 0 {
		return
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		now := time.Now()
		stats, err := st.TrimIndexes(ctx, now.Add(-cfg.EventTTL), now.Add(-cfg.DeliveryTTL))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("retention pass failed; will try again next interval", "err", err)
		case err == nil:
			log.Info("retention pass done", "indexes", stats.Keys, "removed", stats.Removed)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
