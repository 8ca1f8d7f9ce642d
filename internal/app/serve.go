package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/mgmt"
)

// Serve is `jetrelay run` once its settings are parsed: it builds the
// stack, serves the management endpoints when a management port is set,
// and runs until ctx is done and the stack has drained.
func Serve(ctx context.Context, cfg *config.Config, log *slog.Logger, version string) error {
	log.Info("jetrelay starting", "version", version, "role", cfg.Role, "workers", cfg.Workers)
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
		bound, err := mgmt.Serve(ctx, addr, mgmt.Handler(s.Checks(), map[string]http.Handler{
			"GET /metrics": metrics, "GET /actuator/prometheus": metrics,
		}))
		if err != nil {
			return fmt.Errorf("management server: %w", err)
		}
		log.Info("management endpoints up", "addr", bound, "paths", "/healthz /readyz /metrics")
	}
	err = s.Run(ctx)
	log.Info("jetrelay stopped")
	return err
}
