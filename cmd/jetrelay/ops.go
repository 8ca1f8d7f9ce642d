package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/store"
)

// cmdOps is the operator command families `deliveries`, `quarantine`,
// `status` and `events` (internal/ops).
func cmdOps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// A command reports an unreachable Redis in its own error; go-redis's
	// retry chatter would only bury it.
	store.RouteRedisLogs(slog.New(slog.DiscardHandler))
	return ops.Main(ctx, args, ops.IO{Stdout: stdout, Stderr: stderr, Getenv: os.Getenv})
}

// statusHandler serves `jetrelay status` as JSON on the management port:
// the queue as this process sees it plus its own breakers, limits and
// bridge counters.
func (s *stack) statusHandler(cfg *config.Config) http.Handler {
	name := cfg.BridgeID
	if name == "" {
		name, _ = os.Hostname()
	}
	t := ops.New(ops.Options{Redis: s.rdb, JetStream: s.js, Queue: s.queue, MaxDeliveryAge: cfg.MaxDeliveryAge})
	return ops.StatusHandler(t, ops.LocalReplica(name, cfg.Role, s.engine, s.bridge))
}
