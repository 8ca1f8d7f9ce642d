package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// TrimStats counts what one retention pass removed.
type TrimStats struct {
	Keys    int   // index ZSETs visited
	Removed int64 // members removed from them
}

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
			keys, next, err := s.rdb.ScanType(ctx, cursor, p.match, 200, "zset").Result()
			if err != nil {
				return st, fmt.Errorf("store: retention scan %s: %w", p.match, err)
			}
			for _, k := range keys {
				n, err := s.rdb.ZRemRangeByScore(ctx, k, "-inf", max).Result()
				if err != nil {
					return st, fmt.Errorf("store: retention trim %s: %w", strconv.Quote(k), err)
				}
				st.Keys++
				st.Removed += n
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return st, nil
}
