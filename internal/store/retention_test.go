package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

func TestTrimIndexes_RemovesOldIndexMembersAndSkipsCorrelationSets(t *testing.T) {
	env := testenv.Redis(t)
	ctx := context.Background()
	rdb := env.Client
	now := time.Now()
	old := float64(now.Add(-100 * 24 * time.Hour).UnixMilli())
	recent := float64(now.Add(-time.Hour).UnixMilli())
	midDelivery := float64(now.Add(-20 * 24 * time.Hour).UnixMilli())
	for _, key := range []string{"events:_all", "events:acme-corp", "events:null"} {
		rdb.ZAdd(ctx, key, redis.Z{Score: old, Member: "evt_old"}, redis.Z{Score: recent, Member: "evt_new"})
	}
	rdb.ZAdd(ctx, "deliveries:whsub_1", redis.Z{Score: midDelivery, Member: "del_old"}, redis.Z{Score: recent, Member: "del_new"})
	// A correlation SET under the events:* prefix: the pass must skip it, not abort.
	rdb.SAdd(ctx, "events:correlation:webhook_create:whsub_1", "evt_old")

	st, err := store.New(rdb).TrimIndexes(ctx, now.Add(-90*24*time.Hour), now.Add(-14*24*time.Hour))
	if err != nil {
		t.Fatalf("TrimIndexes: %v", err)
	}
	if st.Removed != 4 || st.Keys != 4 {
		t.Errorf("stats = %+v, want 4 members removed from 4 ZSETs", st)
	}
	for _, key := range []string{"events:_all", "events:acme-corp", "events:null"} {
		if m, _ := rdb.ZRange(ctx, key, 0, -1).Result(); len(m) != 1 || m[0] != "evt_new" {
			t.Errorf("%s = %v, want [evt_new]", key, m)
		}
	}
	if m, _ := rdb.ZRange(ctx, "deliveries:whsub_1", 0, -1).Result(); len(m) != 1 || m[0] != "del_new" {
		t.Errorf("deliveries:whsub_1 = %v, want [del_new]", m)
	}
	if n, _ := rdb.SCard(ctx, "events:correlation:webhook_create:whsub_1").Result(); n != 1 {
		t.Errorf("correlation set touched: %d members", n)
	}
}

// A retention pass walks the whole keyspace, records of every kind: each
// replica does it at start-up, when it may have a backlog to drain, and
// every interval. Its SCAN calls, each a round trip, stay about one per
// thousand keys (redis-server's table is walked in slots of a power of
// two), and the indexes of one call are trimmed in one round trip.
func TestTrimIndexes_APassOverALargeKeyspaceTakesAboutOneScanPerThousandKeys(t *testing.T) {
	env := testenv.Redis(t)
	ctx := context.Background()
	rdb := env.Client
	const records, indexes = 30000, 300
	old := float64(time.Now().Add(-100 * 24 * time.Hour).UnixMilli())
	recent := float64(time.Now().Add(-time.Hour).UnixMilli())
	pipe := rdb.Pipeline()
	for i := range records {
		pipe.Set(ctx, "delivery:del_"+strconv.Itoa(i), "{}", 0)
	}
	for i := range indexes {
		pipe.ZAdd(ctx, "deliveries:whsub_"+strconv.Itoa(i), redis.Z{Score: old, Member: "del_old"}, redis.Z{Score: recent, Member: "del_new"})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := store.New(rdb).TrimIndexes(ctx, time.Now().Add(-90*24*time.Hour), time.Now().Add(-14*24*time.Hour))
	if err != nil {
		t.Fatalf("TrimIndexes: %v", err)
	}
	if st.Keys != indexes || st.Removed != indexes {
		t.Errorf("stats = %+v, want %d members removed from %d indexes", st, indexes, indexes)
	}
	for _, k := range []string{"deliveries:whsub_0", "deliveries:whsub_299"} {
		if m, _ := rdb.ZRange(ctx, k, 0, -1).Result(); len(m) != 1 || m[0] != "del_new" {
			t.Errorf("%s = %v, want [del_new]", k, m)
		}
	}
	scans := commandCalls(t, rdb, "scan")
	// Two patterns, each a walk of the table (32,768 slots for 30,300 keys).
	if limit := int64(2 * (32768/1000 + 3)); scans > limit {
		t.Errorf("the pass took %d SCAN calls over %d keys, want at most %d", scans, records+indexes, limit)
	}
}

// commandCalls is how many times redis-server ran the command since its
// statistics were last reset (INFO commandstats).
func commandCalls(t *testing.T, rdb *redis.Client, name string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest+",", ',')], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}
