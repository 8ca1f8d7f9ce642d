package jetrelaycmd

import (
	"github.com/spf13/cobra"

	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/handback"
)

// handbackCommand is `jetrelay handback`: with every jetrelay process
// stopped, return what jetrelay holds to the reference service's Redis keys
// (rollback, docs/migration.md). It reads the same settings as run.
func handbackCommand(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "handback",
		Short: "rollback: with jetrelay stopped, return every delivery it holds to dispatch:pending / dispatch:retry (docs/migration.md)",
		Long: "Rollback: with every jetrelay process stopped, return every delivery jetrelay holds to the reference\n" +
			"service's dispatch:pending / dispatch:retry (docs/migration.md). It reads the settings of 'jetrelay run'.\n\n" + settingsHelp,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromFlags(cmd.Flags(), getenv)
			if err != nil {
				return err
			}
			return handback.Command(cmd.Context(), cfg, app.NewLogger(cfg.LogFormat, cfg.LogLevel, cmd.ErrOrStderr()), cmd.OutOrStdout())
		},
	}
	config.AddFlags(cmd.Flags())
	cmd.Flags().SortFlags = false // the option table's order, which groups them
	return cmd
}
