package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jetrelay/jetrelay/internal/cli"
)

// Environment variables the inbox commands read when the matching flag is
// not given. The secret variable takes a comma-separated list.
const (
	EnvPostgresURL = "JETRELAY_INBOX_POSTGRES_URL"
	EnvSecret      = "JETRELAY_INBOX_SECRET"
	EnvSecretFile  = "JETRELAY_INBOX_SECRET_FILE"
	EnvForward     = "JETRELAY_INBOX_FORWARD"
	EnvListen      = "JETRELAY_INBOX_LISTEN"
	EnvManagement  = "JETRELAY_INBOX_MANAGEMENT_LISTEN"
)

// NewCommand is `jetrelay inbox serve|list|inspect|replay|purge`; getenv
// is the environment a setting comes from when its flag is not given.
func NewCommand(getenv func(string) string) *cobra.Command {
	return cli.Group(&cobra.Command{
		Use:   "inbox",
		Short: "serve|list|inspect|replay|purge a durable receiving inbox in PostgreSQL (verify, store, forward)",
		Long: `A durable receiving inbox in PostgreSQL (docs/receiving.md).

Settings also come from JETRELAY_INBOX_POSTGRES_URL, JETRELAY_INBOX_SECRET
(comma-separated), JETRELAY_INBOX_SECRET_FILE (one secret a line),
JETRELAY_INBOX_FORWARD, JETRELAY_INBOX_LISTEN and
JETRELAY_INBOX_MANAGEMENT_LISTEN (/healthz, /readyz, /metrics).`,
	}, cmdServe(getenv), cmdList(getenv), cmdInspect(getenv), cmdReplay(getenv), cmdPurge(getenv))
}

// secretsFlag never prints its values: a flag's default and errors would.
type secretsFlag struct{ values []string }

func (s *secretsFlag) String() string     { return "" }
func (s *secretsFlag) Set(v string) error { s.values = append(s.values, v); return nil }
func (s *secretsFlag) Type() string       { return "secret" }

// setting is a string flag's value when given, else its variable's, else
// def.
func setting(fs *pflag.FlagSet, name, env, def string, getenv func(string) string) string {
	if f := fs.Lookup(name); f != nil && f.Changed {
		return f.Value.String()
	}
	if v := getenv(env); v != "" {
		return v
	}
	return def
}

func postgresFlag(fs *pflag.FlagSet, getenv func(string) string) func() string {
	fs.String("postgres-url", "", "PostgreSQL URL (env "+EnvPostgresURL+")")
	return func() string { return setting(fs, "postgres-url", EnvPostgresURL, "", getenv) }
}

func cmdServe(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve --listen ADDR --postgres-url URL --forward URL|nats://host:port/subject --secret S [--secret S2]",
		Short: "verify and store deliveries, forward them with leased workers",
		Args:  cli.NoArgs,
	}
	fs := cmd.Flags()
	var cfg Config
	var secrets secretsFlag
	fs.String("listen", ":8090", "intake address; empty runs workers only (env "+EnvListen+")")
	fs.String("management-listen", "", "address of /healthz, /readyz and /metrics; empty serves none (env "+EnvManagement+")")
	pg := postgresFlag(fs, getenv)
	fs.String("forward", "", "where workers forward: http(s) URL or nats://host:port/subject (env "+EnvForward+")")
	fs.Var(&secrets, "secret", "signing secret; repeat for a rotation (env "+EnvSecret+", comma-separated)")
	fs.String("secret-file", "", "file with one signing secret a line (env "+EnvSecretFile+")")
	fs.DurationVar(&cfg.Tolerance, "tolerance", 5*time.Minute, "Standard Webhooks: how far webhook-timestamp may be from this clock before a delivery is refused as a replay")
	fs.BoolVar(&cfg.StandardWebhooksOnly, "standard-webhooks-only", false, "refuse deliveries signed with X-Cycles-Signature alone (the end of a migration to Standard Webhooks)")
	fs.StringArrayVar(&cfg.Paths, "path", nil, "extra intake path besides /; repeatable")
	fs.IntVar(&cfg.Workers, "workers", 4, "claim loops; negative runs intake only")
	fs.IntVar(&cfg.Batch, "batch", 16, "events one claim takes (forwarded concurrently)")
	fs.DurationVar(&cfg.Lease, "lease", 30*time.Second, "how long a claim holds an event before another worker may take it over")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", 10, "failed forwards before an event is dead-lettered")
	fs.DurationVar(&cfg.ForwardTimeout, "forward-timeout", 10*time.Second, "timeout of one forward")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg.PostgresURL = pg()
		cfg.Listen = setting(fs, "listen", EnvListen, ":8090", getenv)
		cfg.Management = setting(fs, "management-listen", EnvManagement, "", getenv)
		cfg.Forward = setting(fs, "forward", EnvForward, "", getenv)
		var err error
		if cfg.Secrets, err = gatherSecrets(secrets.values, setting(fs, "secret-file", EnvSecretFile, "", getenv), getenv); err != nil {
			return err
		}
		cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
		s, err := Start(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		return s.Run(cmd.Context())
	}
	return cmd
}

// gatherSecrets merges --secret, the secret file and the environment
// variable (used only when neither flag gave one).
func gatherSecrets(flags []string, file string, getenv func(string) string) ([]string, error) {
	out := append([]string(nil), flags...)
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("inbox: secret file: %w", err)
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		for s := range strings.SplitSeq(getenv(EnvSecret), ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// openStore connects for the operator commands (migrating, so they work on a
// fresh database too).
func openStore(ctx context.Context, url string) (*Store, func(), error) {
	if url == "" {
		return nil, nil, errors.New("inbox: a PostgreSQL URL is needed (--postgres-url or " + EnvPostgresURL + ")")
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("inbox: postgres: %w", err)
	}
	if err := Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return NewStore(pool), pool.Close, nil
}

func cmdList(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{Use: "list [--status S] [--limit N]", Short: "newest events", Args: cli.NoArgs}
	fs := cmd.Flags()
	pg := postgresFlag(fs, getenv)
	st := fs.String("status", "", "only this status: received, processing, done, failed or dead_letter")
	limit := fs.Int("limit", 50, "at most this many events")
	asJSON := fs.Bool("json", false, "JSON output")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if err := checkStatus(*st); err != nil {
			return err
		}
		store, closeFn, err := openStore(ctx, pg())
		if err != nil {
			return err
		}
		defer closeFn()
		events, err := store.List(ctx, Filter{Status: Status(*st), Limit: *limit})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, events)
		}
		return WriteList(stdout, events, time.Now())
	}
	return cmd
}

func cmdInspect(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{Use: "inspect EVENT_ID", Short: "one event: status, attempts, lease, last error, next action", Args: cli.ExactArgs(1, "one event id")}
	fs := cmd.Flags()
	pg := postgresFlag(fs, getenv)
	maxAttempts := fs.Int("max-attempts", 10, "the inbox's --max-attempts, for the attempt count and next action")
	asJSON := fs.Bool("json", false, "JSON output")
	cmd.RunE = func(cmd *cobra.Command, ids []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		store, closeFn, err := openStore(ctx, pg())
		if err != nil {
			return err
		}
		defer closeFn()
		e, err := store.Get(ctx, ids[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, struct {
				Event
				Body       string `json:"body"`
				NextAction string `json:"next_action"`
			}{e, string(e.Body), NextAction(e, *maxAttempts, time.Now())})
		}
		return WriteInspect(stdout, e, *maxAttempts, time.Now())
	}
	return cmd
}

func cmdReplay(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{Use: "replay EVENT_ID... | --status dead_letter", Short: "forward again (idempotent: an event already due is left alone)"}
	fs := cmd.Flags()
	pg := postgresFlag(fs, getenv)
	st := fs.String("status", "", "replay every event in this status (done, failed or dead_letter)")
	again := fs.Bool("again", false, "also replay named events that are already done (the target gets them once more)")
	asJSON := fs.Bool("json", false, "JSON output")
	cmd.RunE = func(cmd *cobra.Command, ids []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if (len(ids) == 0) == (*st == "") {
			return errors.New("inbox replay: name event ids or --status, not both")
		}
		if err := checkStatus(*st); err != nil {
			return err
		}
		store, closeFn, err := openStore(ctx, pg())
		if err != nil {
			return err
		}
		defer closeFn()
		var replayed []string
		if *st != "" {
			replayed, err = store.ReplayStatus(ctx, Status(*st))
		} else {
			replayed, err = store.Replay(ctx, ids, *again)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, map[string]any{"replayed": replayed})
		}
		fmt.Fprintf(stdout, "replayed %d event(s)\n", len(replayed))
		for _, id := range replayed {
			fmt.Fprintln(stdout, id)
		}
		return nil
	}
	return cmd
}

func cmdPurge(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{Use: "purge --older-than 720h", Short: "delete done events forwarded longer ago than that", Args: cli.NoArgs}
	fs := cmd.Flags()
	pg := postgresFlag(fs, getenv)
	age := fs.Duration("older-than", 0, "delete done events forwarded longer ago than this (e.g. 720h)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if *age <= 0 {
			return errors.New("inbox purge: --older-than must be a positive duration, e.g. 720h")
		}
		store, closeFn, err := openStore(ctx, pg())
		if err != nil {
			return err
		}
		defer closeFn()
		n, err := store.Purge(ctx, *age)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "purged %d done event(s)\n", n)
		return nil
	}
	return cmd
}

func checkStatus(s string) error {
	if s == "" {
		return nil
	}
	for _, st := range Statuses {
		if string(st) == s {
			return nil
		}
	}
	return fmt.Errorf("inbox: unknown status %q (received, processing, done, failed, dead_letter)", s)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
