package jetrelaycmd

import (
	"context"
	"io"
	"os"

	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/config"
)

// cmdRun is `jetrelay run`: the production process.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := config.Load("run", args, os.Getenv, stdout)
	if err != nil {
		return err
	}
	return app.Serve(ctx, cfg, app.NewLogger(cfg.LogFormat, cfg.LogLevel, stderr), version, statusRoutes(cfg))
}
