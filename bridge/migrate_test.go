package bridge_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/store"
)

func TestMigration_DeliveriesAnOlderJetrelayParkedInRedisAreMovedIntoTheStreamOnceAtStartUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	// Parked by an older jetrelay: some due, some due in an hour (the
	// engine puts those off again, in JetStream, from their records).
	due := ids("del_due_", 3)
	later := ids("del_later_", 2)
	var zs []redis.Z
	for _, id := range due {
		zs = append(zs, redis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: id})
	}
	for _, id := range later {
		zs = append(zs, redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: id})
	}
	if err := e.rdb.ZAdd(ctx, store.LegacyDeferredZSet, zs...).Err(); err != nil {
		t.Fatal(err)
	}
	b := e.newBridge(t, bridge.Config{})
	start(t, b)
	eventually(t, 10*time.Second, "all five in the stream", func() bool { return e.streamMsgs(t) == 5 })
	e.assertExactlyOnce(t, append(due, later...))
	if n, err := e.rdb.Exists(ctx, store.LegacyDeferredZSet).Result(); err != nil || n != 0 {
		t.Errorf("jetrelay:deferred still exists (%d, %v): nothing may wait in Redis after the upgrade", n, err)
	}
	if got := b.Stats().Undeferred; got != 5 {
		t.Errorf("Stats().Undeferred = %d, want 5 migrated", got)
	}
}
