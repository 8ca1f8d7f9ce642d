package jetrelaycmd

import (
	"github.com/spf13/cobra"

	"github.com/jetrelay/jetrelay/internal/bench"
	"github.com/jetrelay/jetrelay/internal/demo"
	"github.com/jetrelay/jetrelay/internal/mgmt"
)

// wrapped runs a family's own argument parser under the root command.
func wrapped(use, short string, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, DisableFlagParsing: true, RunE: run}
}

func demoCommand(getenv func(string) string) *cobra.Command {
	return wrapped("demo", "self-contained demo: embedded NATS, throwaway redis-server, receiver, live progress", func(cmd *cobra.Command, args []string) error {
		return demo.Run(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr(), version)
	})
}

func benchCommand(getenv func(string) string) *cobra.Command {
	return wrapped("bench", "benchmark a scenario on this machine (e.g. --scenario isolation --out docs/isolation.md)", func(cmd *cobra.Command, args []string) error {
		return bench.Run(cmd.Context(), args, cmd.OutOrStdout(), cmd.ErrOrStderr(), version)
	})
}

func healthcheckCommand(getenv func(string) string) *cobra.Command {
	return wrapped("healthcheck", "exit 0 when this host's jetrelay answers /readyz (or --url) with 2xx, 1 otherwise: a container's health check", func(cmd *cobra.Command, args []string) error {
		return mgmt.HealthcheckCommand(cmd.Context(), args, getenv, cmd.OutOrStdout())
	})
}
