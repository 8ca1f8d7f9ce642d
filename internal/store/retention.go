package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// TrimStats counts what one retention pass removed.
type TrimStats struct {
	Keys    int   // index ZSETs visited
	Removed int64 // members removed from them
}

// retentionScanCount is the COUNT of the pass's SCAN calls: the keys
// redis-server looks at per call, nearly all of them records of another
// type. A pass over a keyspace of n keys takes about n/retentionScanCount
// round trips, each holding redis-server for about a microsecond per 2
// keys (0.15 ms at 200, 0.5 ms at 1,000, measured with the cost model's
// 120,000-key keyspace); at 200 the round trips of a start-up pass cost
// the jetrelay process 3.6 % of its CPU while it drained that backlog,
// at 1,000 0.6 %.
const retentionScanCount = 1000

// TrimIndexes does the reference service's retention pass over the event and
// delivery indexes: members of events:_all and every events:{tenant} ZSET
// older than eventCutoff, and of every deliveries:{subscription} ZSET older
// than deliveryCutoff, are removed. The records themselves expire by TTL.
//
// Only ZSET keys are touched (SCAN … TYPE zset): the events:correlation:*
// SETs share the events:* prefix, and in the reference v0.1.25.12 the
// WRONGTYPE error they caused aborted the whole pass (contract §8.12).
func (s *Store) TrimIndexes(ctx context.Context, eventCutoff, deliveryCutoff time.Time) (TrimStats, error) {
	var st TrimStats
	for _, p := range []struct {
		match  string
		cutoff time.Time
	}{
		{"events:*", eventCutoff},
		{"deliveries:*", deliveryCutoff},
	} {
		max := "(" + strconv.FormatInt(p.cutoff.UnixMilli(), 10)
		var cursor uint64
		for {
			keys, next, err := s.rdb.ScanType(ctx, cursor, p.match, retentionScanCount, "zset").Result()
			if err != nil {
				return st, fmt.Errorf("store: retention scan %s: %w", p.match, err)
			}
			if err := s.trimBatch(ctx, keys, max, &st); err != nil {
				return st, err
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return st, nil
}

// trimBatch removes the members up to max (exclusive) from every index of
// one SCAN call, in one round trip.
func (s *Store) trimBatch(ctx context.Context, keys []string, max string, st *TrimStats) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.ZRemRangeByScore(ctx, k, "-inf", max)
	}
	_, _ = pipe.Exec(ctx) // each command's error is its own, below
	for i, c := range cmds {
		n, err := c.Result()
		if err != nil {
			return fmt.Errorf("store: retention trim %s: %w", strconv.Quote(keys[i]), err)
		}
		st.Keys++
		st.Removed += n
	}
	return nil
}
