package jetrelaycmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/handback"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/queue"
)

// cmdHandback is `jetrelay handback`: with every jetrelay process stopped,
// return what jetrelay holds to the reference service's Redis keys (rollback,
// docs/migration.md). It reads the same settings as run.
func cmdHandback(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := config.Load("handback", args, os.Getenv, stdout)
	if err != nil {
		return err
	}
	log := app.NewLogger(cfg.LogFormat, cfg.LogLevel, stderr)
	ropts, err := cfg.RedisOptions()
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	var nc *nats.Conn
	if cfg.NATSURL == "" {
		// The embedded server's store: opened here, so jetrelay must be stopped.
		dir, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return err
		}
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("embedded JetStream data dir: %w", err)
		}
		srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: dir, Logger: log.With("component", "nats")})
		if err != nil {
			return fmt.Errorf("embedded NATS: %w", err)
		}
		defer srv.Shutdown()
		nc, err = srv.Connect(nats.Name("jetrelay-handback"))
		if err != nil {
			return err
		}
	} else if nc, err = nats.Connect(cfg.NATSURL, nats.Name("jetrelay-handback")); err != nil {
		return fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	qc := queue.Config{Stream: cfg.Stream, Subject: cfg.Subject, Consumer: cfg.Consumer}
	rep, err := handback.Run(ctx, rdb, js, handback.Config{Queue: qc, Logger: log})
	fmt.Fprintf(stdout, "handed back: %d to dispatch:pending, %d to dispatch:retry, %d already there; %d work items and %d held-checks removed from the stream; %d messages left (not work items)\n",
		rep.Pending, rep.Retry, rep.Present, rep.Removed, rep.Checks, rep.Unhandled)
	return err
}
