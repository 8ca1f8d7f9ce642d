package mgmt

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetrelay/jetrelay/internal/cli"
)

// DefaultProbeTimeout bounds one healthcheck request: above the 800 ms
// /readyz budget, below the 5 s a container runtime gives a healthcheck by
// default.
const DefaultProbeTimeout = 3 * time.Second

// Probe asks url once and returns nil when it answers 2xx, else an error
// naming what it got (the status and the start of the body, or why nothing
// answered).
func Probe(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// No proxy from the environment: the probe is for this very process.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: no answer: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s answered %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// DefaultProbeURL is the /readyz of a jetrelay on this host, from the same
// MANAGEMENT_PORT and JETRELAY_MANAGEMENT_HOST settings `run` reads. A
// wildcard or empty host means loopback.
func DefaultProbeURL(getenv func(string) string) string {
	port := getenv("MANAGEMENT_PORT")
	if port == "" {
		port = "9980"
	}
	host := getenv("JETRELAY_MANAGEMENT_HOST")
	switch host {
	case "", "0.0.0.0", "::", "[::]":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(strings.Trim(host, "[]"), port) + "/readyz"
}

// HealthcheckCommand is `jetrelay healthcheck`: it probes a running
// jetrelay's management endpoint (by default this host's /readyz, from
// getenv's MANAGEMENT_PORT) and succeeds when it is ready. A scratch image
// has no wget or curl, so a container's HEALTHCHECK runs the binary itself.
func HealthcheckCommand(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "healthcheck [--url URL] [--timeout D]",
		Short: "exit 0 when this host's jetrelay answers /readyz (or --url) with 2xx, 1 otherwise: a container's health check",
		Long:  "Exits 0 when URL answers 2xx, 1 otherwise (for container and orchestrator health checks).",
		Args:  cli.NoArgs,
	}
	url := cmd.Flags().String("url", "", "URL to probe; 2xx is healthy (default: /readyz on MANAGEMENT_PORT of this host)")
	timeout := cmd.Flags().Duration("timeout", DefaultProbeTimeout, "how long to wait for the answer")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *timeout <= 0 {
			return cli.Usagef("healthcheck: --timeout must be positive")
		}
		if *url == "" {
			*url = DefaultProbeURL(getenv)
		}
		return Probe(cmd.Context(), *url, *timeout)
	}
	return cmd
}
