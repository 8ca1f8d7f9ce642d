package bridge

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode"

	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/proto"
)

// Defaults applied by New.
const (
	DefaultBatchSize      = 256
	DefaultBlockTimeout   = time.Second
	DefaultRetryPoll      = time.Second
	DefaultHeartbeatTTL   = 5 * time.Second
	DefaultPublishTimeout = 5 * time.Second
	DefaultRetryBatchSize = 100
)

// maxInstanceIDLen keeps key names sane; hostnames are at most 253 bytes.
const maxInstanceIDLen = 253

// Config tunes a Bridge. The zero value of every field means its default.
type Config struct {
	// Queue names the stream the ids are published into.
	Queue QueueConfig
	// InstanceID names this bridge's processing list
	// (dispatch:processing:<InstanceID>) and heartbeat key
	// (jetrelay:bridge:<InstanceID>). It must be unique among live bridges
	// and stable across restarts of the same instance, so a restarted bridge
	// republishes what it left in flight at once instead of waiting for
	// another instance to adopt it after HeartbeatTTL. Default: os.Hostname(),
	// which fits a StatefulSet or a VM; under a Deployment pod names change
	// on restart and recovery happens through adoption instead.
	InstanceID string
	// QueueMode says where this bridge publishes: EmbeddedQueue for a
	// JetStream inside this process, ExternalQueue for a NATS cluster shared
	// with other replicas. It is written into the heartbeat, so operators
	// (and `jetrelay status`) see a fleet of separate embedded queues.
	// Empty leaves it out.
	QueueMode string
	// BatchSize is how many ids are moved per pipelined round trip (default 256).
	BatchSize int
	// BlockTimeout is how long BLMOVE waits when dispatch:pending is empty
	// (default 1s; go-redis rounds anything shorter up to 1s).
	BlockTimeout time.Duration
	// RetryBatchSize is how many due ids one promotion from dispatch:retry
	// moves (default 100, the reference's RETRY_BATCH_SIZE).
	RetryBatchSize int
	// RetryPoll is how often due ids are promoted from the legacy
	// dispatch:retry ZSET (default 1s).
	RetryPoll time.Duration
	// HeartbeatTTL is the lifetime of this instance's heartbeat key; it is
	// refreshed every TTL/3. Another bridge adopts this instance's processing
	// list once the key has expired, and scans for such orphans every TTL/3;
	// `jetrelay handback` takes the bridge for running until then, so a
	// killed bridge should not count as alive for long (default 5s).
	HeartbeatTTL time.Duration
	// PublishTimeout bounds the wait for one batch's PubAcks (default 5s).
	// Ids not acknowledged by then stay in the processing list and are retried.
	PublishTimeout time.Duration
	// AdoptLegacyProcessing makes this bridge also adopt the entries of the
	// dispatch:processing list the reference service (v0.1.25.18+) keeps
	// whose claim (dispatch:processing:claimed_at) is older than
	// LegacyProcessingIdle, as the reference's own recovery does: safe while
	// a reference replica still runs, since a live one acks long before.
	AdoptLegacyProcessing bool
	// LegacyProcessingIdle is how long an entry of the reference's list must
	// have been claimed before it is adopted; an entry without a claim is
	// stamped when first seen (default 2m, the reference's
	// DISPATCH_PROCESSING_RECOVERY_IDLE_MS).
	LegacyProcessingIdle time.Duration
	// Logger receives the bridge's logs; nil discards them.
	Logger *slog.Logger
	// TracerProvider makes a PRODUCER span per published work item, in
	// its delivery's trace, and puts its context in the message headers;
	// nil: no spans and no extra Redis read.
	TracerProvider trace.TracerProvider

	// Ordering is the fleet default ordering of subscriptions whose own
	// setting names none (JETRELAY_ORDERING; route.go).
	Ordering proto.Ordering
}

func (c Config) withDefaults() (Config, error) {
	c.Queue = c.Queue.WithDefaults()
	if c.InstanceID == "" {
		host, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("bridge: InstanceID unset and hostname unavailable: %w", err)
		}
		c.InstanceID = host
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BlockTimeout == 0 {
		c.BlockTimeout = DefaultBlockTimeout
	}
	if c.RetryPoll == 0 {
		c.RetryPoll = DefaultRetryPoll
	}
	if c.HeartbeatTTL == 0 {
		c.HeartbeatTTL = DefaultHeartbeatTTL
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.RetryBatchSize == 0 {
		c.RetryBatchSize = DefaultRetryBatchSize
	}
	if c.LegacyProcessingIdle == 0 {
		c.LegacyProcessingIdle = DefaultLegacyProcessingIdle
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, c.validate()
}

func (c Config) validate() error {
	var errs []error
	if err := c.Queue.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := validateInstanceID(c.InstanceID); err != nil {
		errs = append(errs, err)
	}
	if c.RetryBatchSize < 1 {
		errs = append(errs, fmt.Errorf("retry batch size %d must be positive", c.RetryBatchSize))
	}
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch size %d must be positive", c.BatchSize))
	}
	if c.BlockTimeout < time.Second {
		errs = append(errs, fmt.Errorf("block timeout %s must be at least 1s (go-redis truncates below it)", c.BlockTimeout))
	}
	if c.RetryPoll <= 0 {
		errs = append(errs, fmt.Errorf("retry poll %s must be positive", c.RetryPoll))
	}
	if c.HeartbeatTTL < time.Second {
		errs = append(errs, fmt.Errorf("heartbeat TTL %s must be at least 1s", c.HeartbeatTTL))
	}
	if c.PublishTimeout <= 0 {
		errs = append(errs, fmt.Errorf("publish timeout %s must be positive", c.PublishTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bridge: invalid config: %w", err)
	}
	return nil
}

// validateInstanceID refuses ids that would collide with the reference
// service's own dispatch:processing:* companion keys or make odd key names.
func validateInstanceID(id string) error {
	switch {
	case id == "":
		return errors.New("instance id is empty")
	case len(id) > maxInstanceIDLen:
		return fmt.Errorf("instance id is %d bytes, limit %d", len(id), maxInstanceIDLen)
	case id == "claimed_at" || id == "claim_owner":
		return fmt.Errorf("instance id %q is reserved by the reference service's dispatch:processing:%s key", id, id)
	case strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("instance id %q contains whitespace or control characters", id)
	}
	return nil
}
