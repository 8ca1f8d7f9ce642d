package handback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/queue"
)

// Command is `jetrelay handback` with run's settings: it opens the Redis and
// the JetStream that run would use (the embedded server's store when
// NATS_URL is empty, which is why jetrelay must be stopped), runs Run and
// prints its report to stdout.
func Command(ctx context.Context, cfg *config.Config, log *slog.Logger, stdout io.Writer) error {
	ropts, err := cfg.RedisOptions()
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	var nc *nats.Conn
	if cfg.NATSURL == "" {
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
		if nc, err = srv.Connect(nats.Name("jetrelay-handback")); err != nil {
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
	rep, err := Run(ctx, rdb, js, Config{Queue: qc, Logger: log})
	if errors.Is(err, ErrRunning) {
		return err // nothing was done; the error names what runs
	}
	fmt.Fprintf(stdout, "handed back: %d to dispatch:pending, %d to dispatch:retry, %d already there; %d work items and %d held-checks removed from the stream; %d messages left (not work items)\n",
		rep.Pending, rep.Retry, rep.Present, rep.Removed, rep.Checks, rep.Unhandled)
	return err
}
