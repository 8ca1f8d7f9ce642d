package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/proto"
)

// Reads and writes of the operator tools (`jetrelay deliveries`,
// `quarantine`, `status`). They go through admin's own indexes — the
// webhooks:* SETs and the deliveries:{subscription} ZSETs — never KEYS or
// SCAN over the keyspace, so they cost the same on a large production Redis
// as on a laptop.

// Admin's index keys (contract §2); the bridge's keys are in dispatch.go.
const (
	deliveryIndexPrefix = "deliveries:"
	// DeliveryTTL is the TTL admin gives a delivery record when it creates
	// one (events.retention.delivery-ttl-days, 14 days); a requeued
	// delivery gets it again, as a new one would.
	DeliveryTTL = 14 * 24 * time.Hour
)

// DeliveryIndexKey is admin's deliveries:{subscription} ZSET, scored by
// attempted_at epoch millis.
func DeliveryIndexKey(subscriptionID string) string { return deliveryIndexPrefix + subscriptionID }

// SubscriptionIDs lists admin's webhooks:_all, or webhooks:{tenant} when
// tenant is set.
func (s *Store) SubscriptionIDs(ctx context.Context, tenant string) ([]string, error) {
	key := AllSubscriptions
	if tenant != "" {
		key = TenantSubscriptions(tenant)
	}
	ids, err := s.rdb.SMembers(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", key, err)
	}
	return ids, nil
}

// IndexedDelivery is one member of a deliveries:{subscription} index.
type IndexedDelivery struct {
	ID             string
	SubscriptionID string
	// AttemptedAtMs is the index score: the delivery's attempted_at.
	AttemptedAtMs int64
}

// IndexedDeliveries reads subscriptionID's deliveries whose attempted_at
// lies in [since, until] (a zero time is unbounded), oldest first.
func (s *Store) IndexedDeliveries(ctx context.Context, subscriptionID string, since, until time.Time) ([]IndexedDelivery, error) {
	by := &redis.ZRangeBy{Min: "-inf", Max: "+inf"}
	if !since.IsZero() {
		by.Min = strconv.FormatInt(since.UnixMilli(), 10)
	}
	if !until.IsZero() {
		by.Max = strconv.FormatInt(until.UnixMilli(), 10)
	}
	key := DeliveryIndexKey(subscriptionID)
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, key, by).Result()
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", key, err)
	}
	out := make([]IndexedDelivery, 0, len(zs))
	for _, z := range zs {
		id, _ := z.Member.(string)
		out = append(out, IndexedDelivery{ID: id, SubscriptionID: subscriptionID, AttemptedAtMs: int64(z.Score)})
	}
	return out, nil
}

// DeliveryResult is one record of a Deliveries batch: the record, or why
// there is none (an error wrapping ErrNotFound, a *CorruptError).
type DeliveryResult struct {
	ID     string
	Record *DeliveryRecord
	Err    error
}

// Deliveries reads many delivery records in one round trip. The error is
// non-nil only when Redis could not answer; a missing or unreadable record
// is reported in its result.
func (s *Store) Deliveries(ctx context.Context, ids []string) ([]DeliveryResult, error) {
	out := make([]DeliveryResult, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = DeliveryKey(id)
	}
	vals, errs := s.read(ctx, len(keys), keys...)
	for i, id := range ids {
		out[i].ID = id
		if isInfra(errs[i]) {
			return nil, errs[i]
		}
		if out[i].Err = errs[i]; out[i].Err != nil {
			continue
		}
		if out[i].Err = checkSize(keys[i], vals[i], MaxDeliveryRecord); out[i].Err != nil {
			continue
		}
		d, err := proto.ParseDelivery(vals[i])
		if err != nil {
			out[i].Err = &CorruptError{Key: keys[i], Err: err, Raw: vals[i]}
			continue
		}
		out[i].Record = &DeliveryRecord{Raw: vals[i], Delivery: d}
	}
	return out, nil
}

// Raw reads one string key as stored (an event or subscription record for
// display). A missing key wraps ErrNotFound.
func (s *Store) Raw(ctx context.Context, key string) ([]byte, error) {
	return s.get(ctx, key)
}

// requeueLua resets a delivery and pushes it the way admin's live dispatch
// enqueues a new one (SAVE_AND_ENQUEUE_ONCE_LUA: SET, EXPIRE, ZADD
// deliveries:{sub}, LPUSH dispatch:pending), but only while the record
// still holds exactly the bytes the reset was computed from: a second run,
// a concurrent run or an engine write in between makes it a no-op, so a
// requeue sends once however often it is run.
// KEYS = [delivery:{id}, deliveries:{sub}, dispatch:pending]
// ARGV = [expected json, new json, score, id, ttl seconds]
// Returns 1 requeued, 0 changed underneath, -1 gone.
const requeueLua = `local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('LPUSH', KEYS[3], ARGV[4])
return 1`

// The operator scripts are immutable (text and hash), so one of each serves
// every Store.
var (
	requeueScript            = redis.NewScript(requeueLua)
	releaseQuarantinedScript = redis.NewScript(releaseQuarantinedLua)
)

// ErrNotRequeueable is returned by Requeue for a delivery whose status is
// not FAILED: PENDING and RETRYING ones are still the engine's, SUCCESS ones
// were delivered.
var ErrNotRequeueable = errors.New("store: only FAILED deliveries are requeued")

// Requeue puts a FAILED delivery back to PENDING with its attempts and
// last answer cleared, attempted_at = now (the staleness baseline and
// index score, as for a new delivery) and jetrelay_requeued_at = now (a
// redrive is fresh evidence for the engines' breakers), and pushes it onto
// dispatch:pending,
// atomically. dryRun checks and reports without writing. A delivery that is
// not FAILED gives ErrNotRequeueable; a missing one ErrNotFound; one that
// changes while we look is read again.
func (s *Store) Requeue(ctx context.Context, id string, now time.Time, dryRun bool) (*DeliveryRecord, error) {
	for attempt := range maxUpdateAttempts {
		if attempt > 0 {
			if err := conflictBackoff(ctx, attempt); err != nil {
				return nil, err
			}
		}
		rec, err := s.Delivery(ctx, id)
		if err != nil {
			return nil, err
		}
		if rec.Status != proto.DeliveryFailed {
			return rec, fmt.Errorf("%s is %s: %w", strconv.Quote(id), rec.Status, ErrNotRequeueable)
		}
		if dryRun {
			return rec, nil
		}
		requeued, err := s.RequeueRecord(ctx, rec, now)
		if !errors.Is(err, ErrConflict) {
			return requeued, err
		}
	}
	return nil, fmt.Errorf("%s: %w", strconv.Quote(id), ErrConflict)
}

// RequeueRecord resets rec's delivery to PENDING as Requeue does (attempts
// and last answer cleared, attempted_at = now, jetrelay_requeued_at = now)
// and pushes it onto
// dispatch:pending, atomically, only while its record still holds exactly
// rec.Raw; otherwise it changes nothing and returns an error wrapping
// ErrConflict. The caller decides that rec may be requeued: Requeue for a
// FAILED delivery, the operator tools for one found stuck (neither terminal
// nor queued anywhere), whose check the compare keeps true up to the write.
func (s *Store) RequeueRecord(ctx context.Context, rec *DeliveryRecord, now time.Time) (*DeliveryRecord, error) {
	id := rec.DeliveryID
	p := Patch{
		{"status", proto.DeliveryPending},
		{"attempted_at", now},
		{"completed_at", nil},
		{"attempts", 0},
		{"response_status", nil},
		{"response_time_ms", nil},
		{"error_message", nil},
		{"next_retry_at", nil},
		// Fresh evidence for the breakers of every replica
		// (engine.freshEvidence): the operator redrives because the
		// endpoint is fixed.
		{"jetrelay_requeued_at", now},
	}
	if rec.Waiting != nil {
		p = append(p, Field{Name: "jetrelay_waiting", Value: nil})
	}
	next, err := p.apply(rec.Raw)
	if err != nil {
		return nil, err
	}
	d, err := proto.ParseDelivery(next)
	if err != nil {
		return nil, fmt.Errorf("store: requeue would leave %s unreadable: %w", strconv.Quote(id), err)
	}
	keys := []string{DeliveryKey(id), DeliveryIndexKey(rec.SubscriptionID), PendingList}
	res, err := requeueScript.Run(ctx, s.rdb, keys, rec.Raw, next,
		now.UnixMilli(), id, int64(DeliveryTTL/time.Second)).Int()
	if err != nil {
		return nil, fmt.Errorf("store: requeue %s: %w", strconv.Quote(id), err)
	}
	switch res {
	case 1:
		return &DeliveryRecord{Raw: next, Delivery: d}, nil
	case -1:
		return nil, fmt.Errorf("%s vanished during requeue: %w", strconv.Quote(id), ErrNotFound)
	}
	return nil, fmt.Errorf("%s changed during requeue: %w", strconv.Quote(id), ErrConflict)
}

// QuarantineEntries returns up to count dispatch:failed entries from
// offset on, newest first, as stored.
func (s *Store) QuarantineEntries(ctx context.Context, offset, count int64) ([]string, int64, error) {
	var rng *redis.StringSliceCmd
	var total *redis.IntCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		rng = p.LRange(ctx, FailedList, offset, offset+count-1)
		total = p.LLen(ctx, FailedList)
		return nil
	}); err != nil {
		return nil, 0, fmt.Errorf("store: read %s: %w", FailedList, err)
	}
	return rng.Val(), total.Val(), nil
}

// releaseQuarantinedLua removes one quarantine entry and pushes its
// delivery id onto dispatch:pending in one step, so an entry is neither
// lost nor pushed twice. Returns 0 when the entry is no longer there.
// KEYS = [dispatch:failed, dispatch:pending] ARGV = [entry, delivery id]
const releaseQuarantinedLua = `if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[2])
return 1`

// ReleaseQuarantined removes entry (exactly as stored) from dispatch:failed
// and pushes deliveryID onto dispatch:pending. It reports false when the
// entry was already gone (released by someone else).
func (s *Store) ReleaseQuarantined(ctx context.Context, entry, deliveryID string) (bool, error) {
	n, err := releaseQuarantinedScript.Run(ctx, s.rdb, []string{FailedList, PendingList}, entry, deliveryID).Int()
	if err != nil {
		return false, fmt.Errorf("store: release %s from %s: %w", strconv.Quote(deliveryID), FailedList, err)
	}
	return n == 1, nil
}

// QueueCounts are the Redis sides of the dispatch queue.
type QueueCounts struct {
	// Pending is LLEN dispatch:pending: ids waiting for a bridge.
	Pending int64
	// OldestPendingID is the id a bridge takes next (the list's tail).
	OldestPendingID string
	// LegacyRetry is ZCARD dispatch:retry (the reference's retry ZSET).
	LegacyRetry int64
	// Quarantined is LLEN dispatch:failed.
	Quarantined int64
	// LegacyDeferred is ZCARD jetrelay:deferred.
	LegacyDeferred int64
}

// QueueCounts reads the Redis queue lengths in one round trip.
func (s *Store) QueueCounts(ctx context.Context) (QueueCounts, error) {
	var pending, retry, failed, deferred *redis.IntCmd
	var oldest *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		pending = p.LLen(ctx, PendingList)
		oldest = p.LIndex(ctx, PendingList, -1)
		retry = p.ZCard(ctx, RetryZSet)
		failed = p.LLen(ctx, FailedList)
		deferred = p.ZCard(ctx, LegacyDeferredZSet)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return QueueCounts{}, fmt.Errorf("store: read queue lengths: %w", err)
	}
	return QueueCounts{Pending: pending.Val(), OldestPendingID: oldest.Val(), LegacyRetry: retry.Val(), Quarantined: failed.Val(), LegacyDeferred: deferred.Val()}, nil
}

// BridgeInstance is one bridge that registered in jetrelay:bridges.
type BridgeInstance struct {
	ID string `json:"id"`
	// Alive is whether its heartbeat key is still there (refreshed every
	// few seconds while it runs).
	Alive bool `json:"alive"`
	// Heartbeat is the heartbeat's value ("pid=… beat_at_ms=…").
	Heartbeat string `json:"heartbeat,omitempty"`
	// Processing is the length of its dispatch:processing:{id} list: ids
	// moved but not yet confirmed stored in JetStream.
	Processing int64 `json:"processing"`
}

// Bridges reads the bridge registry with each instance's heartbeat and
// processing list length.
func (s *Store) Bridges(ctx context.Context) ([]BridgeInstance, error) {
	ids, err := s.rdb.SMembers(ctx, BridgesSet).Result()
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", BridgesSet, err)
	}
	beats := make([]*redis.StringCmd, len(ids))
	lens := make([]*redis.IntCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			beats[i] = p.Get(ctx, HeartbeatKey(id))
			lens[i] = p.LLen(ctx, ProcessingList(id))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: read bridge heartbeats: %w", err)
	}
	out := make([]BridgeInstance, len(ids))
	for i, id := range ids {
		beat, err := beats[i].Result()
		out[i] = BridgeInstance{ID: id, Alive: err == nil, Heartbeat: beat, Processing: lens[i].Val()}
	}
	return out, nil
}

// InRedisQueue says where in Redis's dispatch structures delivery id sits:
// "dispatch:pending", a bridge's processing list, the reference service's
// dispatch:processing, "dispatch:retry" or
// "jetrelay:deferred" (with the epoch millis it is due), or "" when it is
// in none of them.
func (s *Store) InRedisQueue(ctx context.Context, id string, bridges []BridgeInstance) (where string, dueMs int64, err error) {
	lists := []string{PendingList, LegacyProcessingList}
	for _, b := range bridges {
		lists = append(lists, ProcessingList(b.ID))
	}
	pos := make([]*redis.IntCmd, len(lists))
	zsets := []string{RetryZSet, LegacyDeferredZSet}
	scores := make([]*redis.FloatCmd, len(zsets))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, l := range lists {
			pos[i] = p.LPos(ctx, l, id, redis.LPosArgs{})
		}
		for i, z := range zsets {
			scores[i] = p.ZScore(ctx, z, id)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, fmt.Errorf("store: look for %s in the dispatch lists: %w", strconv.Quote(id), err)
	}
	for i, p := range pos {
		if p.Err() == nil {
			return lists[i], 0, nil
		}
	}
	for i, sc := range scores {
		if sc.Err() == nil {
			return zsets[i], int64(sc.Val()), nil
		}
	}
	return "", 0, nil
}
