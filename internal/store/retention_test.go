package store_test

import (
	"context"
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
