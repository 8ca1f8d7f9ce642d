package jetrelaycmd

import (
	"github.com/spf13/cobra"

	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/config"
)

// settingsHelp is what run and handback say of their flags, generated
// from internal/config's option table.
const settingsHelp = `Every flag has an environment variable (named beside it); a flag wins
over its variable, which wins over the default.`

// runCommand is `jetrelay run`: the production process.
func runCommand(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run the bridge (Redis dispatch:pending → JetStream) and the engine (JetStream → destinations)",
		Long:  "Run the bridge (Redis dispatch:pending → JetStream) and the engine (JetStream → destinations).\n\n" + settingsHelp,
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromFlags(cmd.Flags(), getenv)
			if err != nil {
				return err
			}
			return app.Serve(cmd.Context(), cfg, app.NewLogger(cfg.LogFormat, cfg.LogLevel, cmd.ErrOrStderr()), version, statusRoutes(cfg))
		},
	}
	config.AddFlags(cmd.Flags())
	cmd.Flags().SortFlags = false // the option table's order, which groups them
	return cmd
}
