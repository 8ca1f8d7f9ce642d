package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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

// Command runs `jetrelay inbox <serve|list|inspect|replay|purge>` with args (the
// words after "inbox").
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return errors.New("inbox: name a subcommand: serve, list, inspect, replay or purge")
		}
		return nil
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stderr)
	case "list":
		return cmdList(ctx, args[1:], stdout, stderr)
	case "inspect":
		return cmdInspect(ctx, args[1:], stdout, stderr)
	case "replay":
		return cmdReplay(ctx, args[1:], stdout, stderr)
	case "purge":
		return cmdPurge(ctx, args[1:], stdout, stderr)
	}
	usage(stderr)
	return fmt.Errorf("inbox: unknown subcommand %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: jetrelay inbox <subcommand> [flags]

A durable receiving inbox in PostgreSQL (docs/receiving.md).

  serve   --listen ADDR --postgres-url URL --forward URL|nats://host:port/subject --secret S [--secret S2]
          verify and store deliveries, forward them with leased workers
  list    [--status S] [--limit N] [--json]       newest events
  inspect [--json] EVENT_ID                        one event: status, attempts, lease, last error, next action
  replay  EVENT_ID... | --status dead_letter        forward again (idempotent: an event already due is left alone)
  purge   --older-than 720h                        delete done events forwarded longer ago than that

Settings also come from JETRELAY_INBOX_POSTGRES_URL, JETRELAY_INBOX_SECRET
(comma-separated), JETRELAY_INBOX_SECRET_FILE (one secret a line),
JETRELAY_INBOX_FORWARD, JETRELAY_INBOX_LISTEN and
JETRELAY_INBOX_MANAGEMENT_LISTEN (/healthz, /readyz, /metrics).
`)
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// secretsFlag never prints its values: flag's defaults and errors would.
type secretsFlag struct{ values []string }

func (s *secretsFlag) String() string     { return "" }
func (s *secretsFlag) Set(v string) error { s.values = append(s.values, v); return nil }

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("jetrelay inbox "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses flags wherever they sit among the positional arguments, so
// `inspect ID --json` works as well as `inspect --json ID`.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func postgresFlag(fs *flag.FlagSet) *string {
	return fs.String("postgres-url", os.Getenv(EnvPostgresURL), "PostgreSQL URL (env "+EnvPostgresURL+")")
}

func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	var cfg Config
	var secrets secretsFlag
	var paths repeated
	fs.StringVar(&cfg.Listen, "listen", envOr(EnvListen, ":8090"), "intake address; empty runs workers only (env "+EnvListen+")")
	fs.StringVar(&cfg.Management, "management-listen", os.Getenv(EnvManagement), "address of /healthz, /readyz and /metrics; empty serves none (env "+EnvManagement+")")
	pg := postgresFlag(fs)
	fs.StringVar(&cfg.Forward, "forward", os.Getenv(EnvForward), "where workers forward: http(s) URL or nats://host:port/subject (env "+EnvForward+")")
	fs.Var(&secrets, "secret", "signing secret; repeat for a rotation (env "+EnvSecret+", comma-separated)")
	secretFile := fs.String("secret-file", os.Getenv(EnvSecretFile), "file with one signing secret a line (env "+EnvSecretFile+")")
	fs.DurationVar(&cfg.Tolerance, "tolerance", 5*time.Minute, "Standard Webhooks: how far webhook-timestamp may be from this clock before a delivery is refused as a replay")
	fs.BoolVar(&cfg.StandardWebhooksOnly, "standard-webhooks-only", false, "refuse deliveries signed with X-Cycles-Signature alone (the end of a migration to Standard Webhooks)")
	fs.Var(&paths, "path", "extra intake path besides /; repeatable")
	fs.IntVar(&cfg.Workers, "workers", 4, "claim loops; negative runs intake only")
	fs.IntVar(&cfg.Batch, "batch", 16, "events one claim takes (forwarded concurrently)")
	fs.DurationVar(&cfg.Lease, "lease", 30*time.Second, "how long a claim holds an event before another worker may take it over")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", 10, "failed forwards before an event is dead-lettered")
	fs.DurationVar(&cfg.ForwardTimeout, "forward-timeout", 10*time.Second, "timeout of one forward")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	cfg.PostgresURL, cfg.Paths = *pg, paths
	var err error
	if cfg.Secrets, err = gatherSecrets(secrets.values, *secretFile); err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	s, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// gatherSecrets merges --secret, the secret file and the environment
// variable (used only when neither flag gave one).
func gatherSecrets(flags []string, file string) ([]string, error) {
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
		for s := range strings.SplitSeq(os.Getenv(EnvSecret), ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
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

func cmdList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("list", stderr)
	pg := postgresFlag(fs)
	st := fs.String("status", "", "only this status: received, processing, done, failed or dead_letter")
	limit := fs.Int("limit", 50, "at most this many events")
	asJSON := fs.Bool("json", false, "JSON output")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if err := checkStatus(*st); err != nil {
		return err
	}
	store, closeFn, err := openStore(ctx, *pg)
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

func cmdInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", stderr)
	pg := postgresFlag(fs)
	maxAttempts := fs.Int("max-attempts", 10, "the inbox's --max-attempts, for the attempt count and next action")
	asJSON := fs.Bool("json", false, "JSON output")
	ids, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return errors.New("inbox inspect: name one event id")
	}
	store, closeFn, err := openStore(ctx, *pg)
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

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", stderr)
	pg := postgresFlag(fs)
	st := fs.String("status", "", "replay every event in this status (done, failed or dead_letter)")
	again := fs.Bool("again", false, "also replay named events that are already done (the target gets them once more)")
	asJSON := fs.Bool("json", false, "JSON output")
	ids, err := parse(fs, args)
	if err != nil {
		return err
	}
	if (len(ids) == 0) == (*st == "") {
		return errors.New("inbox replay: name event ids or --status, not both")
	}
	if err := checkStatus(*st); err != nil {
		return err
	}
	store, closeFn, err := openStore(ctx, *pg)
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

func cmdPurge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("purge", stderr)
	pg := postgresFlag(fs)
	age := fs.Duration("older-than", 0, "delete done events forwarded longer ago than this (e.g. 720h)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *age <= 0 {
		return errors.New("inbox purge: --older-than must be a positive duration, e.g. 720h")
	}
	store, closeFn, err := openStore(ctx, *pg)
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
