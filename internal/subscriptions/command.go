package subscriptions

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tidwall/sjson"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// NewCommand is `jetrelay subscriptions create|get|list|set-status|settings|ordering`:
// subscriptions for destinations admin's API refuses (nats://, sqs://, any
// compiled-in plugin's scheme), written with admin's own Lua and JSON so
// that admin and the engine read them like any other. getenv is the
// environment its settings come from.
func NewCommand(getenv func(string) string) *cobra.Command {
	return cli.Group(&cobra.Command{
		Use:   "subscriptions",
		Short: "create|get|list|set-status|settings|ordering subscriptions for nats://, sqs:// and other transports admin's API refuses",
		Long: fmt.Sprintf(`Subscriptions for any compiled-in transport (%s), stored exactly as
cycles-server-admin stores them.

Redis: --redis-url or --redis-host/--redis-port/--redis-password (env REDIS_URL,
REDIS_HOST, REDIS_PORT, REDIS_PASSWORD). Signing secrets are stored encrypted
with --secret-key (env WEBHOOK_SECRET_ENCRYPTION_KEY), as admin does.`, strings.Join(transport.Drivers(), ", ")),
	}, subscriptionsCreate(getenv), subscriptionsGet(getenv), subscriptionsList(getenv), subscriptionsSetStatus(getenv),
		subscriptionsSettings(getenv), subscriptionsOrdering(getenv))
}

// storeFlags are the Redis and secret-key settings every subcommand takes,
// with the same variables and defaults as `jetrelay run`. A flag wins over
// its variable; the variables are read only after parsing, so --help never
// prints a password or the key as a default.
type storeFlags struct {
	redisURL, redisHost, redisPort, redisPassword, key string
	getenv                                             func(string) string
}

func (f *storeFlags) register(fs *pflag.FlagSet, getenv func(string) string) {
	f.getenv = getenv
	fs.StringVar(&f.redisURL, "redis-url", "", "Redis URL; overrides --redis-host/port/password (env REDIS_URL)")
	fs.StringVar(&f.redisHost, "redis-host", "", "Redis host (env REDIS_HOST, default localhost)")
	fs.StringVar(&f.redisPort, "redis-port", "", "Redis port (env REDIS_PORT, default 6379)")
	fs.StringVar(&f.redisPassword, "redis-password", "", "Redis password (env REDIS_PASSWORD)")
	fs.StringVar(&f.key, "secret-key", "", "base64 AES-256 key signing secrets are encrypted with (env WEBHOOK_SECRET_ENCRYPTION_KEY); none stores them in plaintext")
}

// open connects to Redis and parses the key. Its errors never echo a
// password or the key.
func (f *storeFlags) open() (*redis.Client, *proto.SecretKey, error) {
	setting := func(flagValue, env, def string) string {
		for _, v := range []string{flagValue, f.getenv(env)} {
			if v != "" {
				return v
			}
		}
		return def
	}
	cfg := config.Config{
		RedisURL:      setting(f.redisURL, "REDIS_URL", ""),
		RedisHost:     setting(f.redisHost, "REDIS_HOST", "localhost"),
		RedisPassword: setting(f.redisPassword, "REDIS_PASSWORD", ""),
	}
	port, err := strconv.Atoi(setting(f.redisPort, "REDIS_PORT", "6379"))
	if cfg.RedisURL == "" && (err != nil || port < 1 || port > 65535) {
		return nil, nil, errors.New("REDIS_PORT (--redis-port) must be a port number 1..65535")
	}
	cfg.RedisPort = port
	opts, err := cfg.RedisOptions()
	if err != nil {
		return nil, nil, err
	}
	var key *proto.SecretKey
	if k := setting(f.key, "WEBHOOK_SECRET_ENCRYPTION_KEY", ""); k != "" {
		if key, err = proto.ParseSecretKey(k); err != nil {
			return nil, nil, fmt.Errorf("WEBHOOK_SECRET_ENCRYPTION_KEY (--secret-key): %w", err)
		}
	}
	return redis.NewClient(opts), key, nil
}

func subscriptionsCreate(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create --url URL --event-types T[,T] [--tenant T]",
		Short: "create a subscription; prints the id and the signing secret once",
		Args:  cli.NoArgs,
	}
	fs := cmd.Flags()
	var sf storeFlags
	sf.register(fs, getenv)
	var s admin.Subscription
	var types, categories, status string
	headers := map[string]string{}
	policy := proto.RetryPolicy{}
	fs.StringVar(&s.URL, "url", "", "destination URL: https://…, nats:///subject, nats://host:port/subject, sqs://sqs.<region>.amazonaws.com/<account>/<queue> (required)")
	fs.StringVar(&s.TenantID, "tenant", "", "owning tenant (default __system__, which receives every tenant's events)")
	fs.StringVar(&types, "event-types", "", "comma-separated event types, e.g. budget.exhausted,reservation.denied")
	fs.StringVar(&categories, "event-categories", "", "comma-separated event categories, e.g. budget,tenant")
	fs.StringVar(&s.ScopeFilter, "scope-filter", "", "scope prefix the events must match (default: every scope)")
	fs.StringVar(&s.Name, "name", "", "name")
	fs.StringVar(&s.Description, "description", "", "description")
	fs.StringVar(&s.SigningSecret, "secret", "", "signing secret (default: a generated whsec_ secret, printed once)")
	fs.StringVar(&status, "status", string(proto.SubscriptionActive), "ACTIVE, PAUSED or DISABLED")
	fs.Func("header", "custom header name=value sent with every delivery (repeatable)", func(v string) error {
		name, value, ok := strings.Cut(v, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return errors.New("want name=value")
		}
		if _, dup := headers[name]; dup {
			return fmt.Errorf("header %s given twice", name)
		}
		headers[name] = value
		return nil
	})
	fs.Func("max-retries", "retries after the first attempt, 0..10 (default 5)", intInto(&policy.MaxRetries))
	fs.Func("initial-delay-ms", "first retry delay, 100..60000 ms (default 1000)", int64Into(&policy.InitialDelayMs))
	fs.Func("backoff-multiplier", "delay multiplier per retry, 1.0..10.0 (default 2.0)", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return errors.New("not a number")
		}
		policy.BackoffMultiplier = &f
		return nil
	})
	fs.Func("max-delay-ms", "retry delay cap, 1000..3600000 ms (default 60000)", int64Into(&policy.MaxDelayMs))
	fs.IntVar(&s.DisableAfterFailures, "disable-after-failures", 0, "consecutive failed deliveries that disable the subscription (default 10)")
	var stdWebhooks any
	fs.Func("standard-webhooks", "true or false: sign with Standard Webhooks headers too (default: follow JETRELAY_STANDARD_WEBHOOKS); see `settings`", func(v string) (err error) {
		stdWebhooks, err = optionalBool(v)
		return err
	})
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, stdout, stderr := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		if s.URL == "" {
			return errors.New("subscriptions create: --url is required")
		}
		// The scheme's driver says whether it could ever deliver to this URL,
		// before anything is stored (the engine asks it again at delivery).
		if err := transport.ValidateURL(s.URL); err != nil {
			return fmt.Errorf("subscriptions create: --url: %w", err)
		}
		s.EventTypes, s.EventCategories = splitList(types), splitList(categories)
		s.Status = proto.SubscriptionStatus(strings.ToUpper(status))
		if len(headers) > 0 {
			s.Headers = headers
		}
		if policy != (proto.RetryPolicy{}) {
			s.RetryPolicy = &policy
		}
		if s.DisableAfterFailures < 0 {
			return errors.New("subscriptions create: --disable-after-failures must be at least 1")
		}
		generated := strings.TrimSpace(s.SigningSecret) == "" // admin mints one for a blank secret
		rdb, key, err := sf.open()
		if err != nil {
			return err
		}
		defer rdb.Close()
		w := admin.NewWriter(rdb, key).AllowSchemes(transport.Drivers()...)
		id, secret, err := w.CreateSubscription(ctx, s)
		if err != nil {
			return fmt.Errorf("subscriptions create: %w", err)
		}
		fmt.Fprintf(stdout, "subscription_id: %s\n", id)
		// Which Redis: a default host or a stale REDIS_URL is the usual reason
		// a new subscription "does nothing". The address only, never a password.
		fmt.Fprintf(stdout, "redis: %s db %d\n", rdb.Options().Addr, rdb.Options().DB)
		if warning := ops.SSRFWarning(ctx, rdb, s.URL, getenv); warning != "" {
			fmt.Fprintln(stderr, warning)
		}
		if stdWebhooks != nil {
			if err := setStandardWebhooks(ctx, rdb, id, stdWebhooks); err != nil {
				return fmt.Errorf("subscriptions create: %w", err)
			}
		}
		if generated {
			fmt.Fprintf(stdout, "signing_secret: %s\n", secret)
			// The same key in the form every Standard Webhooks library reads.
			fmt.Fprintf(stdout, "standard_webhooks_secret: %s\n", proto.StandardWebhooksSecret(secret))
			fmt.Fprintln(stderr, "The signing secret is shown only now: receivers verify X-Cycles-Signature with it.")
		}
		if key == nil {
			fmt.Fprintln(stderr, "warning: no WEBHOOK_SECRET_ENCRYPTION_KEY: the signing secret is stored in plaintext")
		}
		return nil
	}
	return cmd
}

func subscriptionsGet(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "print the record as JSON (never the secret)",
		Args:  cli.ExactArgs(1, "ID"),
	}
	var sf storeFlags
	sf.register(cmd.Flags(), getenv)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		rdb, _, err := sf.open()
		if err != nil {
			return err
		}
		defer rdb.Close()
		raw, err := store.New(rdb).SubscriptionRaw(ctx, pos[0])
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("subscriptions get: %w: %s", admin.ErrSubscriptionNotFound, strconv.Quote(pos[0]))
		}
		if err != nil {
			return fmt.Errorf("subscriptions get: %w", err)
		}
		sub, err := proto.ParseSubscription(raw)
		if err != nil {
			return fmt.Errorf("subscriptions get: record of %s: %w", pos[0], err)
		}
		// The record never holds the secret (webhook:secret:{id} does); a
		// password in the URL is hidden all the same.
		if shown := ops.RedactURL(sub.URL); shown != sub.URL {
			if raw, err = sjson.SetBytes(raw, "url", shown); err != nil {
				return fmt.Errorf("subscriptions get: %w", err)
			}
		}
		_, err = fmt.Fprintf(stdout, "%s\n", raw)
		return err
	}
	return cmd
}

func subscriptionsList(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [--tenant T]",
		Short: "id, tenant, status, URL (credentials hidden)",
		Args:  cli.NoArgs,
	}
	var sf storeFlags
	sf.register(cmd.Flags(), getenv)
	tenant := cmd.Flags().String("tenant", "", "only this tenant's subscriptions (__system__ for admin-plane ones)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		rdb, _, err := sf.open()
		if err != nil {
			return err
		}
		defer rdb.Close()
		index := store.AllSubscriptions
		if *tenant != "" {
			index = store.TenantSubscriptions(*tenant)
		}
		ids, records, err := store.New(rdb).ListSubscriptions(ctx, index)
		if err != nil {
			return fmt.Errorf("subscriptions list: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tSTATUS\tURL")
		for i, raw := range records {
			sub, err := proto.ParseSubscription(raw)
			if err != nil {
				fmt.Fprintf(tw, "%s\t?\tUNREADABLE\t%s\n", ids[i], "record does not parse")
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ids[i], sub.TenantID, sub.Status, ops.RedactURL(sub.URL))
		}
		return tw.Flush()
	}
	return cmd
}

func subscriptionsSetStatus(getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set-status ID ACTIVE|PAUSED|DISABLED",
		Short: "change the status as admin's PATCH does",
		Args:  cli.ExactArgs(2, "ID and a status"),
	}
	var sf storeFlags
	sf.register(cmd.Flags(), getenv)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		st := proto.SubscriptionStatus(strings.ToUpper(pos[1]))
		if !st.Known() {
			return fmt.Errorf("subscriptions set-status: status %s is not ACTIVE, PAUSED or DISABLED", strconv.Quote(pos[1]))
		}
		rdb, key, err := sf.open()
		if err != nil {
			return err
		}
		defer rdb.Close()
		if err := admin.NewWriter(rdb, key).SetStatus(ctx, pos[0], st); err != nil {
			return fmt.Errorf("subscriptions set-status: %w", err)
		}
		fmt.Fprintf(stdout, "%s: %s\n", pos[0], st)
		return nil
	}
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func intInto(dst **int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errors.New("not an integer")
		}
		*dst = &n
		return nil
	}
}

func int64Into(dst **int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errors.New("not an integer")
		}
		*dst = &n
		return nil
	}
}
