package jetrelaycmd

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// cmdOps is the operator command families `deliveries`, `quarantine`,
// `status` and `events` (internal/ops).
func cmdOps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// A command reports an unreachable Redis in its own error; go-redis's
	// retry chatter would only bury it.
	store.RouteRedisLogs(slog.New(slog.DiscardHandler))
	return ops.Main(ctx, args, ops.IO{Stdout: stdout, Stderr: stderr, Getenv: os.Getenv})
}

// statusRoutes serve `jetrelay status` as JSON on the management port: the
// queue as this process sees it plus its own breakers, limits and bridge
// counters.
func statusRoutes(cfg *config.Config) func(*app.Stack) map[string]http.Handler {
	return func(s *app.Stack) map[string]http.Handler {
		name := cfg.BridgeID
		if name == "" {
			name, _ = os.Hostname()
		}
		t := ops.New(ops.Options{Redis: s.Redis(), JetStream: s.JetStream(), Queue: s.Queue(), MaxDeliveryAge: cfg.MaxDeliveryAge, ReconcileMargin: cfg.ReconcileMargin, Ordering: proto.Ordering(cfg.Ordering)})
		return map[string]http.Handler{"GET " + ops.StatusPath: ops.StatusHandler(t, ops.LocalReplica(name, cfg.Role, s.Engine(), s.Bridge()))}
	}
}
