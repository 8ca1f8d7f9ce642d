package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/mgmt"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/store"
)

// cmdRun is `jetrelay run`: the production process.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := config.Load("run", args, os.Getenv, stdout)
	if err != nil {
		return err
	}
	log := newLogger(cfg.LogFormat, cfg.LogLevel, stderr)
	store.RouteRedisLogs(log)
	// Which servers, up front: a silent fallback to localhost:6379 or an
	// embedded JetStream nobody meant to use is the first hour's surprise.
	log.Info("jetrelay starting", "version", version, "role", cfg.Role, "workers", cfg.Workers,
		"redis", cfg.RedisAddress(), "nats", cfg.NATSMode())

	s, err := newStack(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer s.close()

	if cfg.ManagementPort > 0 {
		addr := net.JoinHostPort(cfg.ManagementHost, strconv.Itoa(cfg.ManagementPort))
		// /actuator/prometheus is where the reference service's scrape
		// configs point.
		metrics := s.metrics.Handler()
		bound, err := mgmt.Serve(ctx, addr, mgmt.Handler(s.checks(), map[string]http.Handler{
			"GET /metrics": metrics, "GET /actuator/prometheus": metrics,
			"GET " + ops.StatusPath: s.statusHandler(cfg),
		}))
		if err != nil {
			return fmt.Errorf("management server: %w", err)
		}
		log.Info("management endpoints up", "addr", bound, "paths", "/healthz /readyz /metrics "+ops.StatusPath)
	}
	err = s.run(ctx)
	log.Info("jetrelay stopped")
	return err
}
