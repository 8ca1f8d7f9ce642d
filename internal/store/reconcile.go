package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/proto"
)

// The reconciler's reads and writes (internal/reconcile). It finds its
// candidates through admin's indexes (webhooks:_all, deliveries:{sub}) with
// cursors and bounded pages, never KEYS, and acts on a delivery only while
// its record still holds the exact bytes it judged.

// Reconciler keys: jetrelay's own.
const (
	// ReconcileLockKey names the bridge that reconciles now, so that one
	// bridge sweeps at a time (a background sweep, not the delivery path).
	ReconcileLockKey = "jetrelay:reconciler:lock"
	// ReconcileReportKey is a HASH of what the reconcilers did
	// (ReconcileSummary), for `jetrelay status`.
	ReconcileReportKey = "jetrelay:reconciler"
)

// ScanSubscriptions reads one page of admin's webhooks:_all with SSCAN from
// cursor (0 starts a pass); the next cursor is 0 when the pass is done. A
// page may repeat ids, as SSCAN may.
func (s *Store) ScanSubscriptions(ctx context.Context, cursor uint64, count int64) ([]string, uint64, error) {
	ids, next, err := s.rdb.SScan(ctx, AllSubscriptions, cursor, "", count).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("store: scan %s: %w", AllSubscriptions, err)
	}
	return ids, next, nil
}

// IndexPos is a position in a deliveries:{subscription} index: the last
// entry read (its score and member). The zero value is the start.
type IndexPos struct {
	Score  int64
	Member string
}

// IndexPage reads up to count entries of subscriptionID's delivery index
// after pos whose score is at most maxMs, oldest first. Equal scores are
// ordered by member, as Redis orders them, so a page that ends among ties
// resumes after the last member read.
func (s *Store) IndexPage(ctx context.Context, subscriptionID string, pos IndexPos, maxMs int64, count int) ([]IndexedDelivery, error) {
	key := DeliveryIndexKey(subscriptionID)
	min := "-inf"
	if pos != (IndexPos{}) {
		min = strconv.FormatInt(pos.Score, 10)
	}
	out := make([]IndexedDelivery, 0, count)
	for offset := int64(0); ; {
		zs, err := s.rdb.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{
			Min: min, Max: strconv.FormatInt(maxMs, 10), Offset: offset, Count: int64(count),
		}).Result()
		if err != nil {
			return nil, fmt.Errorf("store: read %s: %w", key, err)
		}
		for _, z := range zs {
			id, _ := z.Member.(string)
			score := int64(z.Score)
			if pos != (IndexPos{}) && score == pos.Score && id <= pos.Member {
				continue // read by the page before
			}
			out = append(out, IndexedDelivery{ID: id, SubscriptionID: subscriptionID, AttemptedAtMs: score})
		}
		if len(out) > 0 || len(zs) < count {
			return out, nil
		}
		// A whole page of ties already read: look further.
		offset += int64(len(zs))
	}
}

// putBackLua pushes a delivery id onto dispatch:pending, as admin enqueues
// one, only while the record holds exactly the bytes the caller judged
// stuck (any write in between, an engine's outcome or a requeue, makes it a
// no-op) and the id is not already there: the push leaves the record as it
// is, so it is the list that makes a second push a no-op. The LPOS is
// linear in the list; the reconciler does not act while it is long.
// KEYS = [delivery:{id}, dispatch:pending] ARGV = [expected, id].
// Returns 1 pushed, 0 changed underneath or already pending, -1 gone.
const putBackLua = `local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
if cur ~= ARGV[1] then return 0 end
if redis.call('LPOS', KEYS[2], ARGV[2]) then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[2])
return 1`

var putBackScript = redis.NewScript(putBackLua)

// PutBack pushes rec's delivery onto dispatch:pending if its record is
// still exactly rec.Raw, and reports whether it did. The record is left as
// it is: the engine takes it from there (a RETRYING one is sent at once,
// its next_retry_at being past).
func (s *Store) PutBack(ctx context.Context, rec *DeliveryRecord) (bool, error) {
	n, err := putBackScript.Run(ctx, s.rdb, []string{DeliveryKey(rec.DeliveryID), PendingList}, rec.Raw, rec.DeliveryID).Int()
	if err != nil {
		return false, fmt.Errorf("store: put back %s: %w", strconv.Quote(rec.DeliveryID), err)
	}
	return n == 1, nil
}

// FailExpired writes rec's delivery FAILED with msg (the stale cutoff's
// message) if its record is still exactly rec.Raw, as the engine fails a
// stale delivery: completed_at now, next_retry_at and jetrelay_waiting
// cleared. It reports whether it wrote.
func (s *Store) FailExpired(ctx context.Context, rec *DeliveryRecord, msg string, now time.Time) (bool, error) {
	p := Patch{
		{"status", proto.DeliveryFailed},
		{"completed_at", now},
		{"error_message", msg},
		{"next_retry_at", nil},
	}
	if rec.Waiting != nil {
		p = append(p, Field{Name: "jetrelay_waiting", Value: nil})
	}
	next, err := p.apply(rec.Raw)
	if err != nil {
		return false, err
	}
	n, err := s.cas.Run(ctx, s.rdb, []string{DeliveryKey(rec.DeliveryID)}, rec.Raw, next).Int()
	if err != nil {
		return false, fmt.Errorf("store: fail %s: %w", strconv.Quote(rec.DeliveryID), err)
	}
	return n == 1, nil
}

// leadLua takes or keeps a lease: it sets KEYS[1] to ARGV[1] for ARGV[2]
// ms when the key is free or already ours. Returns 1 when we hold it.
const leadLua = `local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`

var leadScript = redis.NewScript(leadLua)

// Lead takes or renews the lease key for owner for ttl, and reports
// whether owner holds it. A holder that stops renewing loses it after ttl.
func (s *Store) Lead(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	n, err := leadScript.Run(ctx, s.rdb, []string{key}, owner, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("store: take %s: %w", key, err)
	}
	return n == 1, nil
}

// ReconcileSummary is what the reconcilers did, as `jetrelay status`
// shows it: totals since the first sweep, and the last sweep's findings.
type ReconcileSummary struct {
	// By is the bridge instance that swept last, AtMs when (epoch ms).
	By   string
	AtMs int64
	// Stuck is how many deliveries the last sweep found neither terminal
	// nor queued anywhere (put back or failed at the next one).
	Stuck int64
	// Requeued and Failed count every delivery put back, and every one
	// failed at the stale cutoff, since the first sweep.
	Requeued, Failed int64
}

// RecordSweep adds a sweep's findings to the summary in ReconcileReportKey
// (a HASH of jetrelay's own, one per Redis).
func (s *Store) RecordSweep(ctx context.Context, by string, at time.Time, stuck, requeued, failed int) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, ReconcileReportKey, "by", by, "at_ms", at.UnixMilli(), "stuck", stuck)
		p.HIncrBy(ctx, ReconcileReportKey, "requeued", int64(requeued))
		p.HIncrBy(ctx, ReconcileReportKey, "failed", int64(failed))
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: write %s: %w", ReconcileReportKey, err)
	}
	return nil
}

// ReconcileSummary reads the reconcilers' summary; ErrNotFound when no
// reconciler ever swept this Redis.
func (s *Store) ReconcileSummary(ctx context.Context) (ReconcileSummary, error) {
	h, err := s.rdb.HGetAll(ctx, ReconcileReportKey).Result()
	if err != nil {
		return ReconcileSummary{}, fmt.Errorf("store: read %s: %w", ReconcileReportKey, err)
	}
	if len(h) == 0 {
		return ReconcileSummary{}, fmt.Errorf("%s: %w", ReconcileReportKey, ErrNotFound)
	}
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(h[k], 10, 64)
		return n
	}
	return ReconcileSummary{By: h["by"], AtMs: num("at_ms"), Stuck: num("stuck"), Requeued: num("requeued"), Failed: num("failed")}, nil
}
