package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/jetrelay/jetrelay/internal/ssrf"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// Roles a process can run.
const (
	RoleAll    = "all"    // bridge and engine
	RoleBridge = "bridge" // Redis → JetStream only
	RoleEngine = "engine" // JetStream → destinations only
)

// Config is everything `jetrelay run` needs. The zero value of a field means
// its default; Load fills defaults from the option table below.
type Config struct {
	Role string

	RedisURL      string
	RedisHost     string
	RedisPort     int
	RedisPassword string
	// RedisAutoPipeline sends the engine's per-delivery commands through
	// go-redis's autopipeliner.
	RedisAutoPipeline bool

	NATSURL    string // empty: start an embedded JetStream server
	DataDir    string // embedded JetStream storage
	NATSListen string // embedded server's client listener; empty: in-process only
	SyncAlways bool   // embedded server fsyncs every write

	Stream         string
	Subject        string
	Consumer       string
	StreamReplicas int
	AckWait        time.Duration
	MaxAckPending  int

	SecretKey      string // WEBHOOK_SECRET_ENCRYPTION_KEY, base64 of 32 bytes
	AllowUnsigned  bool   // JETRELAY_ALLOW_UNSIGNED: send when a subscription has no secret
	AllowPlaintext bool   // WEBHOOK_SECRET_ALLOW_PLAINTEXT: run without SecretKey
	MaxDeliveryAge time.Duration
	EventTTL       time.Duration
	DeliveryTTL    time.Duration
	RetentionEvery time.Duration

	StandardWebhooks    bool          // JETRELAY_STANDARD_WEBHOOKS: fleet default of Standard Webhooks signing
	SecretRotationGrace time.Duration // JETRELAY_SECRET_ROTATION_GRACE: how long a replaced secret keeps signing

	Workers      int   // JETRELAY_WORKERS: the worker pool's cap
	MinWorkers   int   // JETRELAY_MIN_WORKERS: its floor
	MemoryBudget int64 // JETRELAY_MEMORY_BUDGET, bytes; 0: automatic, negative: none

	BreakerThreshold  int
	BreakerOpenFor    time.Duration
	BreakerMaxOpenFor time.Duration
	MaxInFlight       int
	ParkAfter         time.Duration
	InactivePolicy    string
	InactiveRecheck   time.Duration
	DrainTimeout      time.Duration
	IntakeHolds       bool // JETRELAY_INTAKE_HOLDS: bridges park a held subscription's new deliveries in Redis

	// Ordering is the fleet default ordering (docs/ordering.md).
	Ordering string // JETRELAY_ORDERING

	BridgeID string

	// The reconciler (internal/reconcile), run by the bridge role.
	ReconcilePeriod time.Duration // JETRELAY_RECONCILE_PERIOD
	ReconcileMargin time.Duration // JETRELAY_RECONCILE_MARGIN
	ReconcileBatch  int           // JETRELAY_RECONCILE_BATCH

	// Switch-over from the reference service (docs/migration.md).
	AdoptReferenceProcessing bool          // JETRELAY_ADOPT_REFERENCE_PROCESSING
	ProcessingRecoveryIdle   time.Duration // DISPATCH_PROCESSING_RECOVERY_IDLE_MS
	RetryBatchSize           int           // RETRY_BATCH_SIZE

	ManagementPort int
	ManagementHost string

	LogFormat string
	LogLevel  string

	MetricsTenantTag bool // tenant label on the cycles_webhook_* series

	SSRFAllowCIDRs string // comma-separated; see SSRFAllowList
	SSRFAllowHTTP  bool
	SSRFRefresh    time.Duration

	// settings holds every option's final value by environment name, and
	// getenv the environment Load read, for Getenv.
	settings map[string]string
	getenv   func(string) string
}

// option is one setting: its environment name, flag name, default and help.
type option struct {
	env, flag, def, help string
	set                  setter
}

// setter parses a setting's value into its Config field; kind names the
// value's form in --help (int, duration, ...).
type setter struct {
	kind string
	fn   func(c *Config, v string) error
}

// options are jetrelay's own settings, with the compiled-in transport
// drivers' settings (transport.DriverSettings) before the SSRF ones: each
// driver owns and checks its own.
func options() []option {
	own := []option{
		{"JETRELAY_ROLE", "role", RoleAll, "what this process runs: all, bridge or engine", setString(func(c *Config) *string { return &c.Role })},
		{"REDIS_URL", "redis-url", "", "Redis URL (redis://[:password@]host:port/db); overrides REDIS_HOST/PORT/PASSWORD", setString(func(c *Config) *string { return &c.RedisURL })},
		{"REDIS_HOST", "redis-host", "localhost", "Redis host (as the reference service)", setString(func(c *Config) *string { return &c.RedisHost })},
		{"REDIS_PORT", "redis-port", "6379", "Redis port", setInt(func(c *Config) *int { return &c.RedisPort })},
		{"REDIS_PASSWORD", "redis-password", "", "Redis password", setString(func(c *Config) *string { return &c.RedisPassword })},
		{"JETRELAY_REDIS_AUTOPIPELINE", "redis-autopipeline", "true", "engine's per-delivery Redis reads and writes share round trips (go-redis autopipelining, marked experimental upstream); false: one pipeline per call", setBool(func(c *Config) *bool { return &c.RedisAutoPipeline })},
		{"NATS_URL", "nats-url", "", "NATS server URL(s), comma separated; empty starts an embedded JetStream server", setString(func(c *Config) *string { return &c.NATSURL })},
		{"JETRELAY_DATA_DIR", "data-dir", "jetrelay-data", "embedded JetStream storage directory", setString(func(c *Config) *string { return &c.DataDir })},
		{"JETRELAY_NATS_LISTEN", "nats-listen", "", "client listen address of the embedded NATS server (e.g. 127.0.0.1:4223); empty: in-process only", setString(func(c *Config) *string { return &c.NATSListen })},
		{"JETRELAY_NATS_SYNC_ALWAYS", "nats-sync-always", "false", "embedded JetStream fsyncs every write (survives power loss; several times slower)", setBool(func(c *Config) *bool { return &c.SyncAlways })},
		{"JETRELAY_STREAM", "stream", "JETRELAY_DISPATCH", "JetStream work-queue stream name", setString(func(c *Config) *string { return &c.Stream })},
		{"JETRELAY_SUBJECT", "subject", "jetrelay.dispatch", "subject of work items", setString(func(c *Config) *string { return &c.Subject })},
		{"JETRELAY_CONSUMER", "consumer", "jetrelay-engine", "durable consumer shared by every engine replica", setString(func(c *Config) *string { return &c.Consumer })},
		{"JETRELAY_STREAM_REPLICAS", "stream-replicas", "1", "stream replicas (3 on a 3-node cluster for production)", setInt(func(c *Config) *int { return &c.StreamReplicas })},
		{"JETRELAY_ACK_WAIT", "ack-wait", "60s", "JetStream AckWait; every work item is kept alive with in-progress acks from its fetch to its outcome", setDuration(func(c *Config) *time.Duration { return &c.AckWait })},
		{"JETRELAY_MAX_ACK_PENDING", "max-ack-pending", "10000", "consumer MaxAckPending (in-flight plus scheduled retries)", setInt(func(c *Config) *int { return &c.MaxAckPending })},
		{"WEBHOOK_SECRET_ENCRYPTION_KEY", "secret-key", "", "base64 AES-256 key that decrypts enc: signing secrets (same as admin)", setString(func(c *Config) *string { return &c.SecretKey })},
		{"WEBHOOK_SECRET_ALLOW_PLAINTEXT", "secret-allow-plaintext", "true", "run without WEBHOOK_SECRET_ENCRYPTION_KEY (plaintext secrets only; enc: ones wait); false refuses to start without it, as upstream 0.1.25.24 does by default", setBool(func(c *Config) *bool { return &c.AllowPlaintext })},
		{"JETRELAY_ALLOW_UNSIGNED", "allow-unsigned", "false", "send deliveries of subscriptions without a (non-blank) signing secret unsigned, as upstream before 0.1.25.24; false fails them unsent (\"Webhook signing secret is missing\")", setBool(func(c *Config) *bool { return &c.AllowUnsigned })},
		{"JETRELAY_STANDARD_WEBHOOKS", "standard-webhooks", "false", "also sign deliveries the Standard Webhooks way (webhook-id, webhook-timestamp, webhook-signature beside X-Cycles-Signature) for subscriptions without a setting of their own (jetrelay subscriptions settings)", setBool(func(c *Config) *bool { return &c.StandardWebhooks })},
		{"JETRELAY_SECRET_ROTATION_GRACE", "secret-rotation-grace", "24h", "how long a subscription's replaced signing secret keeps signing Standard Webhooks deliveries beside the new one", setDuration(func(c *Config) *time.Duration { return &c.SecretRotationGrace })},
		{"MAX_DELIVERY_AGE_MS", "max-delivery-age-ms", "86400000", "deliveries older than this are failed without a send", setMillis(func(c *Config) *time.Duration { return &c.MaxDeliveryAge })},
		{"EVENT_TTL_DAYS", "event-ttl-days", "90", "TTL of events jetrelay writes (webhook.disabled)", setDays(func(c *Config) *time.Duration { return &c.EventTTL })},
		{"DELIVERY_TTL_DAYS", "delivery-ttl-days", "14", "delivery record TTL (records keep the TTL admin gave them)", setDays(func(c *Config) *time.Duration { return &c.DeliveryTTL })},
		{"RETENTION_CLEANUP_INTERVAL_MS", "retention-interval-ms", "3600000", "period of the events:*/deliveries:* index trim (0 disables)", setMillis(func(c *Config) *time.Duration { return &c.RetentionEvery })},
		{"JETRELAY_WORKERS", "workers", "4096", "upper bound of concurrent deliveries per engine replica: the worker pool grows from JETRELAY_MIN_WORKERS toward it while slow receivers hold work back and CPU and JETRELAY_MEMORY_BUDGET allow", setInt(func(c *Config) *int { return &c.Workers })},
		{"JETRELAY_MIN_WORKERS", "min-workers", "64", "the worker pool's floor and first size (what fast receivers need); past four times it the pool grows only while its workers spend at least half their time sending; at or above JETRELAY_WORKERS: a fixed pool of JETRELAY_WORKERS", setInt(func(c *Config) *int { return &c.MinWorkers })},
		{"JETRELAY_MEMORY_BUDGET", "memory-budget", "0", "memory the worker pool may grow into (bytes, or with KiB/MiB/GiB); it stops growing at 3/4 of it and shrinks above it. 0: GOMEMLIMIT, else 3/4 of the cgroup memory limit, else 1GiB; -1: none", setBytes(func(c *Config) *int64 { return &c.MemoryBudget })},
		{"JETRELAY_BREAKER_THRESHOLD", "breaker-threshold", "5", "consecutive failed attempts (no answer, 5xx, 408, 429) that open a subscription's circuit breaker", setInt(func(c *Config) *int { return &c.BreakerThreshold })},
		{"JETRELAY_BREAKER_OPEN", "breaker-open", "5s", "first open period of a breaker; doubles while the endpoint stays down", setDuration(func(c *Config) *time.Duration { return &c.BreakerOpenFor })},
		{"JETRELAY_BREAKER_MAX_OPEN", "breaker-max-open", "5m", "cap of a breaker's open period", setDuration(func(c *Config) *time.Duration { return &c.BreakerMaxOpenFor })},
		{"JETRELAY_MAX_IN_FLIGHT_PER_SUBSCRIPTION", "max-in-flight-per-subscription", "0", "upper bound of the adaptive number of concurrent sends to one subscription per replica (0: no bound but the workers)", setInt(func(c *Config) *int { return &c.MaxInFlight })},
		{"JETRELAY_PARK_AFTER", "park-after", "1s", "retry waits, and a fast-answering subscription's busy waits, longer than this (and every other wait: breaker, a subscription busy past its parked line, Redis outage, a secret not stored yet) become JetStream message schedules instead of delayed naks holding an ack slot; a fast subscription's busy wait that gets no delayed nak parks in memory first while it frees slots", setDuration(func(c *Config) *time.Duration { return &c.ParkAfter })},
		{"JETRELAY_INTAKE_HOLDS", "intake-holds", "true", "while a subscription's breaker is open or its sends hang at its limit, bridges leave its new deliveries in Redis (jetrelay:intake:parked:<id>, their records noting why and until when) instead of queueing each one, and put them back when it answers again or their schedule ends; false: every delivery goes through JetStream and waits there", setBool(func(c *Config) *bool { return &c.IntakeHolds })},
		{"JETRELAY_INACTIVE_SUBSCRIPTIONS", "inactive-subscriptions", "defer", "deliveries of a PAUSED/DISABLED subscription: defer (held until re-enabled or stale) or fail (the reference's behaviour)", setString(func(c *Config) *string { return &c.InactivePolicy })},
		{"JETRELAY_INACTIVE_RECHECK", "inactive-recheck", "5s", "how often a PAUSED/DISABLED subscription holding deliveries is checked: how soon they go out once it is ACTIVE again", setDuration(func(c *Config) *time.Duration { return &c.InactiveRecheck })},
		{"JETRELAY_ORDERING", "ordering", "none", "fleet default ordering of a subscription's deliveries: none (parallel), first-attempt (first sends one at a time in enqueue order) or strict (each waits until every earlier one is final); a subscription's own setting (jetrelay subscriptions set-ordering) wins", setString(func(c *Config) *string { return &c.Ordering })},
		{"JETRELAY_DRAIN_TIMEOUT", "drain-timeout", "25s", "on SIGTERM, how long in-flight deliveries may finish before they are released", setDuration(func(c *Config) *time.Duration { return &c.DrainTimeout })},
		{"JETRELAY_SSRF_ALLOW_CIDRS", "ssrf-allow-cidrs", "", "operator allow-list: comma-separated CIDRs webhooks may reach although config:webhook-security blocks them (an internal receiver; 127.0.0.0/8 for tests)", setString(func(c *Config) *string { return &c.SSRFAllowCIDRs })},
		{"JETRELAY_SSRF_ALLOW_HTTP", "ssrf-allow-http", "false", "allow plain http:// webhook URLs although config:webhook-security requires https", setBool(func(c *Config) *bool { return &c.SSRFAllowHTTP })},
		{"JETRELAY_SSRF_REFRESH", "ssrf-refresh", "10s", "how often config:webhook-security is re-read (changes apply without a restart)", setDuration(func(c *Config) *time.Duration { return &c.SSRFRefresh })},
		{"JETRELAY_BRIDGE_ID", "bridge-id", "", "bridge instance id, stable across restarts (default: host name)", setString(func(c *Config) *string { return &c.BridgeID })},
		{"JETRELAY_RECONCILE_PERIOD", "reconcile-period", "1m", "how often a bridge looks for stuck deliveries (neither terminal nor queued anywhere) and puts them back; one bridge at a time", setDuration(func(c *Config) *time.Duration { return &c.ReconcilePeriod })},
		{"JETRELAY_RECONCILE_MARGIN", "reconcile-margin", "5m", "how long past due a delivery must be, and in no queue, before the reconciler calls it stuck", setDuration(func(c *Config) *time.Duration { return &c.ReconcileMargin })},
		{"JETRELAY_RECONCILE_BATCH", "reconcile-batch", "2000", "delivery index entries (admin's deliveries:{subscription}) one reconcile sweep reads; a large keyspace is covered over several sweeps", setInt(func(c *Config) *int { return &c.ReconcileBatch })},
		{"JETRELAY_ADOPT_REFERENCE_PROCESSING", "adopt-reference-processing", "true", "adopt the reference service's dispatch:processing entries whose claim is idle for DISPATCH_PROCESSING_RECOVERY_IDLE_MS (switch-over; safe beside live reference replicas)", setBool(func(c *Config) *bool { return &c.AdoptReferenceProcessing })},
		{"DISPATCH_PROCESSING_RECOVERY_IDLE_MS", "dispatch-processing-recovery-idle-ms", "120000", "how long a dispatch:processing claim of the reference service must be idle before jetrelay adopts it (the reference's own setting)", setMillis(func(c *Config) *time.Duration { return &c.ProcessingRecoveryIdle })},
		{"RETRY_BATCH_SIZE", "retry-batch-size", "100", "due ids moved per promotion from the reference's dispatch:retry ZSET (the reference's own setting)", setInt(func(c *Config) *int { return &c.RetryBatchSize })},
		{"MANAGEMENT_PORT", "management-port", "9980", "port of /healthz, /readyz, /metrics, /status and /actuator/health (0 disables)", setInt(func(c *Config) *int { return &c.ManagementPort })},
		{"JETRELAY_MANAGEMENT_HOST", "management-host", "", "listen host of the management server (empty: all interfaces)", setString(func(c *Config) *string { return &c.ManagementHost })},
		{"JETRELAY_LOG_FORMAT", "log-format", "text", "log format: text or json", setString(func(c *Config) *string { return &c.LogFormat })},
		{"JETRELAY_LOG_LEVEL", "log-level", "info", "log level: debug, info, warn or error", setString(func(c *Config) *string { return &c.LogLevel })},
		{"CYCLES_METRICS_TENANT_TAG_ENABLED", "metrics-tenant-tag", "false", "add the tenant label to the cycles_webhook_* metrics (as the reference's setting; off by default since upstream 0.1.25.20)", setBool(func(c *Config) *bool { return &c.MetricsTenantTag })},
	}
	at := slices.IndexFunc(own, func(o option) bool { return o.env == "JETRELAY_SSRF_ALLOW_CIDRS" })
	return slices.Insert(own, at, driverOptions()...)
}

// driverOptions are the transport drivers' settings as options: Load keeps
// their values for the drivers (Getenv) and validate has each driver check
// them, without quoting a value.
func driverOptions() []option {
	var out []option
	for _, s := range transport.DriverSettings() {
		out = append(out, option{s.Env, s.Flag, s.Default, s.Usage, setter{"string", func(*Config, string) error { return nil }}})
	}
	return out
}

// Load reads configuration: defaults, then the environment (getenv), then
// flags in args. It returns flag.ErrHelp when args ask for help (after
// printing usage to out).
func Load(name string, args []string, getenv func(string) string, out io.Writer) (*Config, error) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	// pflag prints a parse error and then the whole usage (one line per
	// setting): the error would scroll away above it. The error is returned
	// instead, with a pointer to --help; usage is printed only when asked for.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	AddFlags(fs)
	if err := fs.Parse(args); errors.Is(err, pflag.ErrHelp) {
		Usage(out, name)
		return nil, flag.ErrHelp
	} else if err != nil {
		return nil, fmt.Errorf("%w (jetrelay %s --help lists every flag)", err, name)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("config: unexpected argument %q", fs.Arg(0))
	}
	return FromFlags(fs, getenv)
}

// AddFlags registers every setting as a flag on fs, so that run, handback
// and the operator tools read exactly the same settings. A flag's value is
// checked as it is parsed (`--workers abc` is an error naming the flag);
// FromFlags turns the parsed flags and the environment into the Config.
func AddFlags(fs *pflag.FlagSet) {
	for _, o := range options() {
		f := fs.VarPF(&optionValue{o: o, v: o.def}, o.flag, "", o.help+" (env "+o.env+")")
		if o.set.kind == "bool" {
			f.NoOptDefVal = "true"
		}
	}
}

// optionValue is one setting as a pflag.Value: it keeps the text given
// once the setting's parser accepts it.
type optionValue struct {
	o option
	v string
}

func (v *optionValue) String() string { return v.v }
func (v *optionValue) Type() string   { return v.o.set.kind }

func (v *optionValue) Set(s string) error {
	if err := v.o.set.fn(&Config{}, s); err != nil {
		return err
	}
	v.v = s
	return nil
}

// FromFlags builds and validates the Config from fs, parsed after AddFlags,
// and the environment: a flag given on the command line wins over its
// variable (getenv), which wins over the default.
func FromFlags(fs *pflag.FlagSet, getenv func(string) string) (*Config, error) {
	c := &Config{settings: make(map[string]string), getenv: getenv}
	for _, o := range options() {
		v := o.def
		if e := getenv(o.env); e != "" {
			v = e
		}
		if f := fs.Lookup(o.flag); f != nil && f.Changed {
			v = f.Value.String()
		}
		if err := o.set.fn(c, v); err != nil {
			return nil, fmt.Errorf("config: %s=%q: %w", o.env, v, err)
		}
		c.settings[o.env] = v
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Usage prints every setting with its flag, environment name and default.
func Usage(w io.Writer, name string) {
	fmt.Fprintf(w, "Usage: jetrelay %s [flags]\n\nEvery flag has an environment variable; a flag wins over its variable.\n\n", name)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FLAG\tENV\tDEFAULT\tMEANING")
	for _, o := range options() {
		def := o.def
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "--%s\t%s\t%s\t%s\n", o.flag, o.env, def, o.help)
	}
	tw.Flush()
}

func (c *Config) validate() error {
	var errs []error
	switch c.Role {
	case RoleAll, RoleBridge, RoleEngine:
	default:
		errs = append(errs, fmt.Errorf("JETRELAY_ROLE (--role) must be all, bridge or engine, got %q", c.Role))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("JETRELAY_WORKERS (--workers) must be at least 1, got %d", c.Workers))
	}
	if c.MinWorkers < 1 {
		errs = append(errs, fmt.Errorf("JETRELAY_MIN_WORKERS (--min-workers) must be at least 1, got %d", c.MinWorkers))
	}
	if c.MemoryBudget < -1 {
		errs = append(errs, fmt.Errorf("JETRELAY_MEMORY_BUDGET (--memory-budget) must be a size, 0 (automatic) or -1 (none), got %d", c.MemoryBudget))
	}
	if c.BreakerThreshold < 1 {
		errs = append(errs, fmt.Errorf("JETRELAY_BREAKER_THRESHOLD (--breaker-threshold) must be at least 1, got %d", c.BreakerThreshold))
	}
	if c.BreakerOpenFor <= 0 || c.BreakerMaxOpenFor < c.BreakerOpenFor {
		errs = append(errs, fmt.Errorf("JETRELAY_BREAKER_OPEN (%s) must be positive and at most JETRELAY_BREAKER_MAX_OPEN (%s)", c.BreakerOpenFor, c.BreakerMaxOpenFor))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("JETRELAY_MAX_IN_FLIGHT_PER_SUBSCRIPTION (--max-in-flight-per-subscription) must not be negative, got %d", c.MaxInFlight))
	}
	if c.SecretRotationGrace <= 0 {
		errs = append(errs, fmt.Errorf("JETRELAY_SECRET_ROTATION_GRACE (--secret-rotation-grace) must be positive, got %s", c.SecretRotationGrace))
	}
	if c.ParkAfter <= 0 {
		errs = append(errs, fmt.Errorf("JETRELAY_PARK_AFTER (--park-after) must be positive, got %s", c.ParkAfter))
	}
	if c.InactiveRecheck <= 0 {
		errs = append(errs, fmt.Errorf("JETRELAY_INACTIVE_RECHECK (--inactive-recheck) must be positive, got %s", c.InactiveRecheck))
	}
	if o, err := proto.ParseOrdering(c.Ordering); err != nil || o == "" {
		errs = append(errs, fmt.Errorf("JETRELAY_ORDERING (--ordering) must be none, first-attempt or strict, got %q", c.Ordering))
	}
	switch c.InactivePolicy {
	case "defer", "fail":
	default:
		errs = append(errs, fmt.Errorf("JETRELAY_INACTIVE_SUBSCRIPTIONS (--inactive-subscriptions) must be defer or fail, got %q", c.InactivePolicy))
	}
	if c.StreamReplicas < 1 || c.StreamReplicas > 5 {
		errs = append(errs, fmt.Errorf("JETRELAY_STREAM_REPLICAS (--stream-replicas) must be 1..5, got %d", c.StreamReplicas))
	}
	if c.MaxDeliveryAge <= 0 {
		errs = append(errs, errors.New("MAX_DELIVERY_AGE_MS (--max-delivery-age-ms) must be positive"))
	}
	if c.AckWait < time.Second {
		errs = append(errs, fmt.Errorf("JETRELAY_ACK_WAIT (--ack-wait) must be at least 1s, got %s", c.AckWait))
	}
	if c.MaxAckPending < c.Workers {
		errs = append(errs, fmt.Errorf("JETRELAY_MAX_ACK_PENDING (--max-ack-pending) must be at least JETRELAY_WORKERS: %d < %d", c.MaxAckPending, c.Workers))
	}
	if c.SecretKey == "" && !c.AllowPlaintext {
		errs = append(errs, errors.New("WEBHOOK_SECRET_ENCRYPTION_KEY (--secret-key) is required while WEBHOOK_SECRET_ALLOW_PLAINTEXT (--secret-allow-plaintext) is false"))
	}
	if c.ProcessingRecoveryIdle <= 0 {
		errs = append(errs, fmt.Errorf("DISPATCH_PROCESSING_RECOVERY_IDLE_MS (--dispatch-processing-recovery-idle-ms) must be positive, got %s", c.ProcessingRecoveryIdle))
	}
	if c.ReconcilePeriod <= 0 || c.ReconcileMargin <= 0 {
		errs = append(errs, fmt.Errorf("JETRELAY_RECONCILE_PERIOD (%s) and JETRELAY_RECONCILE_MARGIN (%s) must be positive", c.ReconcilePeriod, c.ReconcileMargin))
	}
	if c.ReconcileBatch < 1 {
		errs = append(errs, fmt.Errorf("JETRELAY_RECONCILE_BATCH (--reconcile-batch) must be at least 1, got %d", c.ReconcileBatch))
	}
	if c.RetryBatchSize < 1 {
		errs = append(errs, fmt.Errorf("RETRY_BATCH_SIZE (--retry-batch-size) must be at least 1, got %d", c.RetryBatchSize))
	}
	if c.ManagementPort < 0 || c.ManagementPort > 65535 {
		errs = append(errs, fmt.Errorf("MANAGEMENT_PORT (--management-port) must be 0..65535, got %d", c.ManagementPort))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("JETRELAY_LOG_FORMAT (--log-format) must be text or json, got %q", c.LogFormat))
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("JETRELAY_LOG_LEVEL (--log-level) must be debug, info, warn or error, got %q", c.LogLevel))
	}
	if c.RedisURL != "" {
		if _, err := redis.ParseURL(c.RedisURL); err != nil {
			errs = append(errs, fmt.Errorf("REDIS_URL: %v", redactURLError(err)))
		}
	}
	if _, err := c.SSRFAllowList(); err != nil {
		errs = append(errs, err)
	}
	if c.SSRFRefresh < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("JETRELAY_SSRF_REFRESH (--ssrf-refresh) must be at least 100ms, got %s", c.SSRFRefresh))
	}
	if err := transport.CheckSettings(c.Getenv); err != nil {
		errs = append(errs, err)
	}
	if c.BridgeID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "jetrelay"
		}
		c.BridgeID = h
	}
	if len(errs) > 0 {
		return fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return nil
}

// Getenv answers a setting by its environment-variable name, as transport
// plugins read them (transport.Env.Getenv): the value of one of these
// options as loaded (flags included, defaults applied), else the
// environment Load read, which holds the standard AWS_* variables and a
// plugin's own settings.
func (c *Config) Getenv(key string) string {
	if v, ok := c.settings[key]; ok {
		return v
	}
	if c.getenv == nil {
		return ""
	}
	return c.getenv(key)
}

// SSRFAllowList parses JETRELAY_SSRF_ALLOW_CIDRS: literal CIDRs or bare
// addresses, comma separated.
func (c *Config) SSRFAllowList() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(c.SSRFAllowCIDRs, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		p, err := ssrf.ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("JETRELAY_SSRF_ALLOW_CIDRS (--ssrf-allow-cidrs): %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// RedisOptions turns the Redis settings into go-redis options: REDIS_URL
// when set, else REDIS_HOST/REDIS_PORT/REDIS_PASSWORD.
func (c *Config) RedisOptions() (*redis.Options, error) {
	if c.RedisURL != "" {
		o, err := redis.ParseURL(c.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("config: REDIS_URL: %v", redactURLError(err))
		}
		return o, nil
	}
	return &redis.Options{
		Addr:     net.JoinHostPort(c.RedisHost, strconv.Itoa(c.RedisPort)),
		Password: c.RedisPassword,
	}, nil
}

// redactURLError keeps a URL parse error from echoing a password.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("invalid URL: %v", ue.Err)
	}
	return err
}

func setString(field func(*Config) *string) setter {
	return setter{"string", func(c *Config, v string) error { *field(c) = v; return nil }}
}

func setInt(field func(*Config) *int) setter {
	return setter{"int", func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		*field(c) = n
		return nil
	}}
}

// setBytes reads a size in bytes, with an optional KiB, MiB or GiB
// suffix; -1 and 0 pass as they are.
func setBytes(field func(*Config) *int64) setter {
	return setter{"size", func(c *Config, v string) error {
		num, unit := strings.TrimSpace(v), int64(1)
		for _, u := range []struct {
			suffix string
			size   int64
		}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
			if n, ok := strings.CutSuffix(num, u.suffix); ok {
				num, unit = strings.TrimSpace(n), u.size
				break
			}
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/unit {
			return fmt.Errorf("not a size (bytes, or a number with KiB, MiB or GiB): %q", v)
		}
		*field(c) = n * unit
		return nil
	}}
}

func setBool(field func(*Config) *bool) setter {
	return setter{"bool", func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not a boolean (true or false): %q", v)
		}
		*field(c) = b
		return nil
	}}
}

func setDuration(field func(*Config) *time.Duration) setter {
	return setter{"duration", func(c *Config, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("not a duration (e.g. 30s, 5m): %q", v)
		}
		*field(c) = d
		return nil
	}}
}

func setMillis(field func(*Config) *time.Duration) setter {
	return setter{"ms", func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("not a non-negative number of milliseconds: %q", v)
		}
		*field(c) = time.Duration(n) * time.Millisecond
		return nil
	}}
}

func setDays(field func(*Config) *time.Duration) setter {
	return setter{"days", func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 3650 {
			return fmt.Errorf("not a number of days between 1 and 3650: %q", v)
		}
		*field(c) = time.Duration(n) * 24 * time.Hour
		return nil
	}}
}

// MarkdownTable writes the settings as the Markdown table the README shows;
// a test keeps the README in step with it.
func MarkdownTable(w io.Writer) {
	fmt.Fprintln(w, "| environment | flag | default | meaning |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, o := range options() {
		def := "`" + o.def + "`"
		if o.def == "" {
			def = "—"
		}
		fmt.Fprintf(w, "| `%s` | `--%s` | %s | %s |\n", o.env, o.flag, def, o.help)
	}
}
