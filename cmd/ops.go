package jetrelaycmd

import (
	"log/slog"
	"net/http"
	"os"

	"github.com/spf13/cobra"

	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// opsCommands are the operator command families `deliveries`,
// `quarantine`, `status` and `events` (internal/ops).
func opsCommands(getenv func(string) string) []*cobra.Command {
	cmds := ops.Commands(getenv)
	for _, c := range cmds {
		// A command reports an unreachable Redis in its own error;
		// go-redis's retry chatter would only bury it.
		c.PersistentPreRun = func(*cobra.Command, []string) { store.RouteRedisLogs(slog.New(slog.DiscardHandler)) }
	}
	return cmds
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
