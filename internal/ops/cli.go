package ops

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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
	"golang.org/x/term"

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

// command is one operator subcommand: its own flags, run's settings, and
// --json.
type command struct {
	name, usage string
	fs          *flag.FlagSet
	own         map[string]bool
	loaded      func() (*config.Config, error)
	json        bool
	mgmtURLs    string
	io          IO
}

// newCommand starts a subcommand's flag set; add its own flags to c.fs,
// then call parse.
func newCommand(name, usage string, o IO) *command {
	c := &command{name: name, usage: usage, fs: flag.NewFlagSet(name, flag.ContinueOnError), io: o}
	c.fs.SetOutput(o.Stderr)
	c.fs.BoolVar(&c.json, "json", false, "print JSON (for scripts) instead of a table")
	return c
}

// managementFlag adds --management-urls for commands that read replicas.
func (c *command) managementFlag() {
	c.fs.StringVar(&c.mgmtURLs, "management-urls", "", "comma-separated management endpoints of the replicas, e.g. http://10.0.0.5:9980 (env JETRELAY_MANAGEMENT_URLS; default http://127.0.0.1:<MANAGEMENT_PORT>)")
}

// parse binds run's settings, parses args (flags may follow positional
// arguments) and returns the positional ones and the config.
func (c *command) parse(args []string) ([]string, *config.Config, error) {
	c.own = map[string]bool{}
	c.fs.VisitAll(func(f *flag.Flag) { c.own[f.Name] = true })
	loaded, err := config.Bind(c.fs, c.io.Getenv)
	if err != nil {
		return nil, nil, err
	}
	c.fs.Usage = c.printUsage
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, nil, err
		}
		if c.fs.NArg() == 0 {
			break
		}
		pos = append(pos, c.fs.Arg(0))
		args = c.fs.Args()[1:]
	}
	cfg, err := loaded()
	return pos, cfg, err
}

func (c *command) printUsage() {
	w := c.fs.Output()
	fmt.Fprintf(w, "Usage: jetrelay %s\n\nFlags:\n", c.usage)
	c.fs.VisitAll(func(f *flag.Flag) {
		if c.own[f.Name] {
			fmt.Fprintf(w, "  --%s\n    \t%s\n", f.Name, f.Usage)
		}
	})
	fmt.Fprint(w, `
Connection settings are those of 'jetrelay run', with the same flags and
environment variables (REDIS_URL or REDIS_HOST/REDIS_PORT/REDIS_PASSWORD,
NATS_URL or JETRELAY_NATS_LISTEN, JETRELAY_STREAM, JETRELAY_SUBJECT,
JETRELAY_CONSUMER, MANAGEMENT_PORT, ...): see 'jetrelay run --help'.
`)
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

// Main runs one operator command family: args[0] is deliveries, quarantine,
// status or events. It returns flag.ErrHelp after printing help.
func Main(ctx context.Context, args []string, o IO) error {
	if len(args) == 0 {
		return errors.New("ops: no command")
	}
	sub := func(family string, cmds map[string]func(context.Context, []string, IO) error, help string) error {
		if len(args) < 2 || args[1] == "-h" || args[1] == "--help" || args[1] == "help" {
			fmt.Fprint(o.Stdout, help)
			if len(args) < 2 {
				return fmt.Errorf("%s: name a subcommand (see 'jetrelay %s --help')", family, family)
			}
			return flag.ErrHelp
		}
		run, ok := cmds[args[1]]
		if !ok {
			fmt.Fprint(o.Stderr, help)
			return fmt.Errorf("%s: unknown subcommand %q", family, args[1])
		}
		return run(ctx, args[2:], o)
	}
	switch args[0] {
	case "deliveries":
		return sub("deliveries", map[string]func(context.Context, []string, IO) error{
			"list": deliveriesList, "inspect": deliveriesInspect, "requeue": deliveriesRequeue,
		}, deliveriesHelp)
	case "quarantine":
		return sub("quarantine", map[string]func(context.Context, []string, IO) error{
			"list": quarantineList, "requeue": quarantineRequeue,
		}, quarantineHelp)
	case "events":
		return sub("events", map[string]func(context.Context, []string, IO) error{"emit": eventsEmit}, eventsHelp)
	case "status":
		return status(ctx, args[1:], o)
	}
	return fmt.Errorf("ops: unknown command %q", args[0])
}

const deliveriesHelp = `Usage: jetrelay deliveries <subcommand> [flags]

  list     [--status S] [--subscription ID] [--tenant T] [--event-type T] [--since T] [--until T] [--limit N] [--offset N]
  inspect  DELIVERY_ID      the record, its event and subscription, attempts, where it is now and what happens next
  requeue  DELIVERY_ID...   or requeue --status FAILED [filters]: back to PENDING, attempts reset, sent again once

Every subcommand takes --json and the connection settings of 'jetrelay run'.
Run 'jetrelay deliveries <subcommand> --help' for its flags.
`

const quarantineHelp = `Usage: jetrelay quarantine <subcommand> [flags]

  list                      entries of dispatch:failed (work items that could not be processed), newest first
  requeue ID... | --all     send quarantined deliveries whose record is readable again back to dispatch:pending

Every subcommand takes --json and the connection settings of 'jetrelay run'.
`

const eventsHelp = `Usage: jetrelay events emit --tenant T --type TYPE [--data JSON] [--scope S]

Writes an event and its deliveries exactly as cycles-server-admin does.
`
