package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/proto"
)

// IO is where a command reads its settings and writes its output.
type IO struct {
	Stdout, Stderr io.Writer
	// Getenv reads the environment (os.Getenv in the binary).
	Getenv func(string) string
	// TTY reports whether w is a terminal (progress bars draw only there);
	// nil means "is it an *os.File on a terminal".
	TTY func(w io.Writer) bool
}

func (o IO) tty(w io.Writer) bool {
	if o.TTY != nil {
		return o.TTY(w)
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// connectTimeout bounds reaching Redis or NATS, so a wrong address gives a
// clear error in seconds rather than a hang.
const connectTimeout = 5 * time.Second

// command is one operator subcommand: its own flags, run's settings
// (hidden from its help), and --json.
type command struct {
	cmd      *cobra.Command
	json     bool
	mgmtURLs string
	io       IO
}

// connectionHelp is what every operator command says of run's settings,
// which it takes too.
const connectionHelp = `Connection settings are those of 'jetrelay run', with the same flags and
environment variables (REDIS_URL or REDIS_HOST/REDIS_PORT/REDIS_PASSWORD,
NATS_URL or JETRELAY_NATS_LISTEN, JETRELAY_STREAM, JETRELAY_SUBJECT,
JETRELAY_CONSUMER, MANAGEMENT_PORT, ...): see 'jetrelay run --help'.`

// newCommand starts a subcommand: add its own flags to c.flags(), then
// call c.runs with what it does.
func newCommand(use, short string, args cobra.PositionalArgs, getenv func(string) string) *command {
	c := &command{cmd: &cobra.Command{Use: use, Short: short, Long: short + ".\n\n" + connectionHelp, Args: args}}
	c.io.Getenv = getenv
	c.flags().BoolVar(&c.json, "json", false, "print JSON (for scripts) instead of a table")
	return c
}

func (c *command) flags() *pflag.FlagSet { return c.cmd.Flags() }

// managementFlag adds --management-urls for commands that read replicas.
func (c *command) managementFlag() {
	c.flags().StringVar(&c.mgmtURLs, "management-urls", "", "comma-separated management endpoints of the replicas, e.g. http://10.0.0.5:9980 (env JETRELAY_MANAGEMENT_URLS; default http://127.0.0.1:<MANAGEMENT_PORT>)")
}

// runs registers run's settings (hidden: 'jetrelay run --help' lists
// them) and what the command does with its positional arguments and the
// config.
func (c *command) runs(run func(ctx context.Context, pos []string, cfg *config.Config) error) *cobra.Command {
	own := map[string]bool{}
	c.flags().VisitAll(func(f *pflag.Flag) { own[f.Name] = true })
	config.AddFlags(c.flags())
	c.flags().VisitAll(func(f *pflag.Flag) { f.Hidden = !own[f.Name] })
	c.cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		c.io.Stdout, c.io.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
		cfg, err := config.FromFlags(cmd.Flags(), c.io.Getenv)
		if err != nil {
			return err
		}
		return run(cmd.Context(), pos, cfg)
	}
	return c.cmd
}

// open connects to Redis (required) and, when withJetStream, to the
// dispatch stream's NATS (optional: its absence is reported, not fatal).
func (c *command) open(ctx context.Context, cfg *config.Config, withJetStream bool) (*Tool, func(), error) {
	ropts, err := cfg.RedisOptions()
	if err != nil {
		return nil, nil, err
	}
	ropts.DialTimeout, ropts.MaxRetries = connectTimeout, 1
	rdb := redis.NewClient(ropts)
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, nil, fmt.Errorf("Redis at %s does not answer: %v (set REDIS_URL, or REDIS_HOST and REDIS_PORT, as for 'jetrelay run')", cfg.RedisAddress(), err)
	}
	closers := []func(){func() { rdb.Close() }}
	o := Options{
		Redis: rdb, MaxDeliveryAge: cfg.MaxDeliveryAge, ReconcileMargin: cfg.ReconcileMargin,
		Queue:    queue.Config{Stream: cfg.Stream, Subject: cfg.Subject, Consumer: cfg.Consumer},
		Ordering: proto.Ordering(cfg.Ordering),
	}
	if withJetStream {
		var nc *nats.Conn
		nc, o.JetStream, o.JetStreamUnavailable = connectJetStream(cfg)
		if nc != nil {
			closers = append(closers, nc.Close)
		}
	}
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	return New(o), closeAll, nil
}

// connectJetStream reaches the NATS that `run` uses: NATS_URL, or the
// embedded server's listener when run was given one.
func connectJetStream(cfg *config.Config) (*nats.Conn, jetstream.JetStream, string) {
	url := cfg.NATSURL
	if url == "" && cfg.NATSListen != "" {
		url = "nats://" + cfg.NATSListen
	}
	if url == "" {
		return nil, nil, "'jetrelay run' uses an embedded JetStream server that only its own process can reach: " +
			"start run with JETRELAY_NATS_LISTEN=127.0.0.1:<port> and give this command the same setting, or use NATS_URL"
	}
	nc, err := nats.Connect(url, nats.Name("jetrelay-ops"), nats.Timeout(connectTimeout), nats.MaxReconnects(0))
	if err != nil {
		return nil, nil, fmt.Sprintf("NATS at %s: %v", cfg.NATSMode(), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err.Error()
	}
	return nc, js, ""
}

// replicas reads the replicas' own state from their management endpoints.
func (c *command) replicas(ctx context.Context, cfg *config.Config) ([]Replica, string) {
	urls := c.mgmtURLs
	if urls == "" {
		urls = c.io.Getenv("JETRELAY_MANAGEMENT_URLS")
	}
	if urls == "" && cfg.ManagementPort > 0 {
		urls = "http://127.0.0.1:" + strconv.Itoa(cfg.ManagementPort)
	}
	if urls == "" {
		return nil, "no management endpoint (MANAGEMENT_PORT is 0 and no --management-urls)"
	}
	rs := ReadReplicas(ctx, &http.Client{Timeout: statusBudget}, strings.Split(urls, ","))
	return rs, ""
}

// output writes v as JSON or with its table writer.
func (c *command) output(v any, table func(io.Writer) error) error {
	if c.json {
		enc := json.NewEncoder(c.io.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return table(c.io.Stdout)
}

// parseTime reads --since/--until: an RFC 3339 instant, a date
// (2026-11-24, UTC midnight) or a duration ago (90m, 2h, 7d).
func parseTime(flagName, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%w: --%s %q is not an RFC 3339 time (2026-11-24T08:00:00Z), a date (2026-11-24) or an age (90m, 2h, 7d)", ErrBadFilter, flagName, s)
}

// Commands are the operator command families deliveries, quarantine,
// status and events; getenv is the environment their settings come from.
func Commands(getenv func(string) string) []*cobra.Command {
	return []*cobra.Command{
		cli.Group(&cobra.Command{
			Use:   "deliveries",
			Short: "list|inspect|requeue deliveries: what happened to an event, where it is now, send it again",
			Long:  "What happened to an event, where its deliveries are now, and sending them again.\n\n" + connectionHelp,
		}, deliveriesList(getenv), deliveriesInspect(getenv), deliveriesRequeue(getenv)),
		cli.Group(&cobra.Command{
			Use:   "quarantine",
			Short: "list|requeue entries of dispatch:failed",
			Long:  "Entries of dispatch:failed: work items that could not be processed.\n\n" + connectionHelp,
		}, quarantineList(getenv), quarantineRequeue(getenv)),
		status(getenv),
		cli.Group(&cobra.Command{
			Use:   "events",
			Short: "emit an event and its deliveries as admin does (try a real delivery in one command)",
		}, eventsEmit(getenv)),
	}
}
