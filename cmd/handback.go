package jetrelaycmd

import (
	"context"
	"io"
	"os"

	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/handback"
)

// cmdHandback is `jetrelay handback`: with every jetrelay process stopped,
// return what jetrelay holds to the reference service's Redis keys (rollback,
// docs/migration.md). It reads the same settings as run.
func cmdHandback(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := config.Load("handback", args, os.Getenv, stdout)
	if err != nil {
		return err
	}
	return handback.Command(ctx, cfg, app.NewLogger(cfg.LogFormat, cfg.LogLevel, stderr), stdout)
}
