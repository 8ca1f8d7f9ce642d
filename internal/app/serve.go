package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/mgmt"
	"github.com/jetrelay/jetrelay/internal/store"
)

// Serve is `jetrelay run` once its settings are parsed: it builds the
// stack, serves the management endpoints when a management port is set
// (with the routes extra returns for the stack, e.g. the operator tools'
// status; extra may be nil), and runs until ctx is done and the stack has
// drained.
func Serve(ctx context.Context, cfg *config.Config, log *slog.Logger, version string, extra func(*Stack) map[string]http.Handler) error {
	store.RouteRedisLogs(log)
	// Which servers, up front: a silent fallback to localhost:6379 or an
	// embedded JetStream nobody meant to use is the first hour's surprise.
	log.Info("jetrelay starting", "version", version, "role", cfg.Role, "workers", cfg.Workers,
		"redis", cfg.RedisAddress(), "nats", cfg.NATSMode())
	s, err := New(ctx, cfg, log, version)
	if err != nil {
		return err
	}
	defer s.Close()

	if cfg.ManagementPort > 0 {
		addr := net.JoinHostPort(cfg.ManagementHost, strconv.Itoa(cfg.ManagementPort))
		// /actuator/prometheus is where the reference service's scrape
		// configs point.
		metrics := s.metrics.Handler()
		routes := map[string]http.Handler{"GET /metrics": metrics, "GET /actuator/prometheus": metrics}
		paths := []string{"/healthz", "/readyz", "/metrics"}
		if extra != nil {
			more := extra(s)
			for _, route := range slices.Sorted(maps.Keys(more)) {
				routes[route] = more[route]
				_, path, _ := strings.Cut(route, " ")
				paths = append(paths, path)
			}
		}
		bound, err := mgmt.Serve(ctx, addr, mgmt.Handler(s.Checks(), routes))
		if err != nil {
			return fmt.Errorf("management server: %w", err)
		}
		paths = append(paths, "/actuator/health[/readiness|/liveness]", "/actuator/prometheus")
		log.Info("management endpoints up", "addr", bound, "paths", strings.Join(paths, " "))
	}
	err = s.Run(ctx)
	log.Info("jetrelay stopped")
	return err
}
