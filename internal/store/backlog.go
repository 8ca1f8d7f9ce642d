package store

import "context"

// Backlogs are the lengths of the Redis lists and sets work waits in.
type Backlogs struct {
	Pending int64 // LLEN dispatch:pending: ids no bridge has taken yet
	Failed  int64 // LLEN dispatch:failed: quarantined work items
	Retry   int64 // ZCARD dispatch:retry: the reference service's retries
}

// Backlogs reads every backlog length in one pipelined round trip; the
// metrics scrape calls it. The age of the oldest pending id is not cheap to
// know; the lengths are.
func (s *Store) Backlogs(ctx context.Context) (Backlogs, error) {
	p := s.rdb.Pipeline()
	lp := p.LLen(ctx, PendingList)
	lf := p.LLen(ctx, FailedList)
	zr := p.ZCard(ctx, RetryZSet)
	if _, err := p.Exec(ctx); err != nil {
		return Backlogs{}, err
	}
	return Backlogs{Pending: lp.Val(), Failed: lf.Val(), Retry: zr.Val()}, nil
}
