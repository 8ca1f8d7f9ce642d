package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Lists and sorted sets the bridge moves delivery ids through (§2).
const (
	// PendingList is the LIST admin and runtime LPUSH new delivery ids to.
	PendingList = "dispatch:pending"
	// RetryZSet holds delivery ids scored by next_retry_at epoch millis.
	RetryZSet = "dispatch:retry"
	// LegacyDeferredZSet is where jetrelay before issue 11 parked put-off
	// deliveries (scored by due epoch millis). Nothing writes it any more;
	// the bridge moves what an older jetrelay left there into
	// dispatch:pending once at start-up.
	LegacyDeferredZSet = "jetrelay:deferred"
	// FailedList keeps quarantined work items for operators (see Quarantine).
	FailedList = "dispatch:failed"
)

// DeliveryKey is the key of a delivery record.
func DeliveryKey(id string) string { return "delivery:" + id }

// EventKey is the key of an event record.
func EventKey(id string) string { return "event:" + id }

// SubscriptionKey is the key of a webhook subscription record.
func SubscriptionKey(id string) string { return "webhook:" + id }

// SecretKey is the key of a subscription's signing secret.
func SecretKey(subscriptionID string) string { return "webhook:secret:" + subscriptionID }

// ErrNotFound means the record's key does not exist.
var ErrNotFound = errors.New("store: record not found")

// ErrCorrupt is matched (errors.Is) by every *CorruptError.
var ErrCorrupt = errors.New("store: corrupt record")

// ErrConflict means a compare-and-set update kept losing to concurrent
// writers until its retry bound ran out; the caller may try again later.
var ErrConflict = errors.New("store: too many concurrent updates")

// CorruptError reports a record that exists but cannot be read: malformed
// JSON, wrong field types, an unknown delivery status, or a key of the wrong
// Redis type. Retrying will not help; an operator has to look at it.
type CorruptError struct {
	Key string
	Err error
	Raw []byte // the stored value when it was a string (for quarantine); never printed
}

// maxErrDetail bounds how much of the underlying parse error is shown, since
// some parse errors quote the offending value and records can be large.
const maxErrDetail = 200

// Error names the key and the cause, never the full stored value.
func (e *CorruptError) Error() string {
	cause := "unreadable"
	if e.Err != nil {
		cause = truncate(e.Err.Error(), maxErrDetail)
	}
	return fmt.Sprintf("store: corrupt record %s: %s", strconv.Quote(e.Key), cause)
}

// Unwrap returns the parse or Redis error.
func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) hold for every CorruptError.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// truncate shortens s to at most n bytes on a rune boundary and marks the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s, n) + "…"
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Store reads and writes the Cycles keyspace. It is safe for concurrent use.
type Store struct {
	rdb redis.UniversalClient
	// hot carries the per-delivery reads and writes (Delivery, Load,
	// RecordOutcome). On a plain client it is the client's autopipeliner:
	// commands that many workers issue at the same moment share one write
	// and one read on one connection instead of a round trip each.
	hot       hotClient
	cas       *redis.Script
	casPair   *redis.Script
	saveEvent *redis.Script
	// casPairEvent is casPair that also saves an event (outcome_event.go).
	casPairEvent *redis.Script
	// casMany writes many delivery records in one call (patchmany.go).
	casMany *redis.Script
	// outcomes writes the outcomes that come together in one script call
	// (outcome_batch.go); nil without the autopipeliner (a cluster or
	// failover client), where each outcome is its own call.
	outcomes *outcomeCommits

	subs *subCache
	// removeLoaded is true once the removal script of the processing
	// lists is known to be in the server's script cache, so that
	// MoveAfterRemoving may pipeline it (dispatch.go).
	removeLoaded atomic.Bool
}

// New returns a Store over rdb. The caller owns rdb and closes it.
func New(rdb redis.UniversalClient) *Store { return NewWithOptions(rdb, Options{AutoPipeline: true}) }

// Options tune a Store.
type Options struct {
	// AutoPipeline sends the per-delivery commands (Delivery, Load,
	// RecordOutcome) through rdb's deferred autopipeliner when rdb is a plain
	// *redis.Client, so that concurrent callers share round trips. Without
	// it (or with another client type) each call is its own pipeline.
	AutoPipeline bool
}

// NewWithOptions is New with opts.
func NewWithOptions(rdb redis.UniversalClient, opts Options) *Store {
	var hot hotClient
	if opts.AutoPipeline {
		hot = hotPath(rdb)
	}
	st := &Store{
		rdb:     rdb,
		hot:     hot,
		cas:     redis.NewScript(casSetLua),
		casPair: redis.NewScript(casPairLua),

		saveEvent:    redis.NewScript(SaveEventLua),
		casPairEvent: redis.NewScript(casPairEventLua),
		casMany:      redis.NewScript(casManyLua),

		subs: newSubCache(),
	}
	if hot != nil {
		st.outcomes = newOutcomeCommits(hot)
	}
	return st
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// get reads key. A missing key is ErrNotFound; a key holding another Redis
// type is a *CorruptError; anything else is an infrastructure error.
func (s *Store) get(ctx context.Context, key string) ([]byte, error) {
	raw, err := s.rdb.Get(ctx, key).Bytes()
	return raw, classifyGet(key, err)
}

func classifyGet(key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redis.Nil):
		return fmt.Errorf("%s: %w", strconv.Quote(key), ErrNotFound)
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return &CorruptError{Key: key, Err: err}
	default:
		return fmt.Errorf("store: get %s: %w", strconv.Quote(key), err)
	}
}

// hotClient is what the per-delivery commands need.
type hotClient interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

// hotPath returns rdb's deferred autopipeliner when rdb is a plain client:
// its commands return at once and their results wait for the batch they
// joined, so one worker's several reads share a round trip with each other
// and with every other worker's. Otherwise (cluster, failover clients) it
// returns nil and the store pipelines per call.
func hotPath(rdb redis.UniversalClient) hotClient {
	if c, ok := rdb.(*redis.Client); ok {
		if ap, err := c.AsyncAutoPipeline(); err == nil {
			return ap
		}
	}
	return nil
}

// gets reads keys in one round trip: through the autopipeliner when there is
// one, as one pipeline otherwise. Each command carries its own result.
func (s *Store) gets(ctx context.Context, keys ...string) []*redis.StringCmd {
	cmds := make([]*redis.StringCmd, len(keys))
	if s.hot != nil {
		for i, k := range keys {
			cmds[i] = s.hot.Get(ctx, k)
		}
		return cmds
	}
	// Pipelined's own error is only the first command's; each command is
	// classified by the caller instead, since a missing key is not a failure.
	s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	})
	return cmds
}

// scripter is where the per-delivery scripts run.
func (s *Store) scripter() redis.Scripter {
	if s.hot != nil {
		return s.hot
	}
	return s.rdb
}
