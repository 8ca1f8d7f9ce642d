package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/store"
)

// queueMode is what this process's bridge announces in its heartbeat.
func queueMode(embedded bool) string {
	if embedded {
		return bridge.EmbeddedQueue
	}
	return bridge.ExternalQueue
}

// warnSeparateQueues says loudly at start-up when this replica runs an
// embedded JetStream while other bridges are alive on the same Redis: the
// replicas then do not share a queue (docs/deployment.md). It only reads;
// an unreadable registry is not worth failing the start over.
func warnSeparateQueues(ctx context.Context, rdb *redis.Client, self string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	bridges, err := store.New(rdb).Bridges(ctx)
	if err != nil {
		log.Debug("could not read the bridge registry to look for other replicas", "err", err)
		return
	}
	if msg := store.SeparateQueues(bridges, self); msg != "" {
		log.Error("SEPARATE QUEUES: "+msg, "bridge_id", self)
	}
}
