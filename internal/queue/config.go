package queue

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults applied by Config.WithDefaults.
const (
	DefaultStream        = "JETRELAY_DISPATCH"
	DefaultSubject       = "jetrelay.dispatch"
	DefaultConsumer      = "jetrelay-engine"
	DefaultReplicas      = 1
	DefaultDuplicates    = 2 * time.Minute
	DefaultAckWait       = 60 * time.Second
	DefaultMaxAckPending = 10000
)

// minDuplicates is the server's lower bound for the dedupe window (error 10052 below it).
const minDuplicates = 100 * time.Millisecond

// Config names and sizes the dispatch stream and its consumer. The zero value
// of every field means its default; call WithDefaults before use.
type Config struct {
	// Stream is the stream name (default "JETRELAY_DISPATCH").
	Stream string
	// Subject is the one literal subject work items are published to; the
	// stream listens on exactly it (default "jetrelay.dispatch").
	Subject string
	// Consumer is the durable consumer every engine replica shares
	// (default "jetrelay-engine").
	Consumer string
	// Replicas is the stream's replica count, 1..5 (default 1; use 3 on a cluster).
	Replicas int
	// Duplicates is the Nats-Msg-Id dedupe window (default 2m). The bridge's
	// recovery republishes ids it may already have published; the window is
	// what turns those into no-ops.
	Duplicates time.Duration
	// MaxMsgs caps queued work items (0 = unlimited). It is back-pressure,
	// not a stream limit (see StreamConfig and Room): at the cap the bridge
	// stops moving new ids out of Redis; nothing stored is ever evicted.
	MaxMsgs int64
	// MaxBytes caps the stream's stored bytes, waiting work included
	// (0 = unlimited), with the same back-pressure rule.
	MaxBytes int64
	// AckWait is how long a delivered item may stay unacknowledged before
	// redelivery (default 60s: above the 30s request timeout plus margin).
	AckWait time.Duration
	// MaxAckPending bounds unacknowledged items across all replicas
	// (default 10000). A delayed nak holds its slot for the whole delay, so
	// this must cover concurrency plus the retry backlog.
	MaxAckPending int
	// MaxDeliver caps server redeliveries (0 = unlimited). Attempts are
	// counted by the engine in Redis; a server cap would also cut off
	// redeliveries caused by crashes and timeouts, so leave it unlimited.
	MaxDeliver int
}

// WithDefaults returns c with every zero field set to its default. Limits
// left at zero become -1, JetStream's "unlimited".
func (c Config) WithDefaults() Config {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	if c.Consumer == "" {
		c.Consumer = DefaultConsumer
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Duplicates == 0 {
		c.Duplicates = DefaultDuplicates
	}
	if c.MaxMsgs == 0 {
		c.MaxMsgs = -1
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = -1
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = -1
	}
	return c
}

// Validate reports the first setting JetStream would refuse or that would
// break the bridge's publishing. It expects a Config with defaults applied.
func (c Config) Validate() error {
	var errs []error
	if c.Stream == "" || strings.ContainsAny(c.Stream, " \t\r\n.*>/\\") {
		errs = append(errs, fmt.Errorf("stream name %q must be non-empty without spaces, '.', '*', '>', '/' or '\\'", c.Stream))
	}
	if err := validateSubject(c.Subject); err != nil {
		errs = append(errs, err)
	}
	if c.Consumer == "" || strings.ContainsAny(c.Consumer, " \t\r\n.*>/\\") {
		errs = append(errs, fmt.Errorf("consumer name %q must be non-empty without spaces, '.', '*', '>', '/' or '\\'", c.Consumer))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas %d out of range 1..5", c.Replicas))
	}
	if c.Duplicates < minDuplicates {
		errs = append(errs, fmt.Errorf("duplicates window %s is below the server minimum %s", c.Duplicates, minDuplicates))
	}
	if c.MaxMsgs < -1 || c.MaxMsgs == 0 {
		errs = append(errs, fmt.Errorf("max msgs %d must be positive or -1", c.MaxMsgs))
	}
	if c.MaxBytes < -1 || c.MaxBytes == 0 {
		errs = append(errs, fmt.Errorf("max bytes %d must be positive or -1", c.MaxBytes))
	}
	if c.AckWait <= 0 {
		errs = append(errs, fmt.Errorf("ack wait %s must be positive", c.AckWait))
	}
	if c.MaxAckPending < 1 {
		errs = append(errs, fmt.Errorf("max ack pending %d must be positive", c.MaxAckPending))
	}
	if c.MaxDeliver < -1 || c.MaxDeliver == 0 {
		errs = append(errs, fmt.Errorf("max deliver %d must be positive or -1", c.MaxDeliver))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("queue: invalid config: %w", err)
	}
	return nil
}

// validateSubject accepts only a literal subject: work items are published
// to it, and a wildcard would make the stream capture unrelated traffic.
func validateSubject(s string) error {
	if s == "" {
		return errors.New("subject is empty")
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return fmt.Errorf("subject %q must be a literal subject (no empty tokens, wildcards or whitespace)", s)
		}
	}
	return nil
}
