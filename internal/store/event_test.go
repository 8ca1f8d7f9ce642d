package store

import (
	"context"
	"strconv"
	"testing"
	"time"
)

func TestSaveEvent_WritesWhatSaveEventLuaWrites(t *testing.T) {
	const ttl = 7776000 * time.Second
	ts := time.Date(2026, 4, 1, 12, 7, 41, 502117000, time.UTC)
	tests := []struct {
		name           string
		tenant, cid    string
		wantTenantKey  string
		wantCorrelated string // "" = no correlation SET
	}{
		{"tenant event with correlation id", "acme-corp", "webhook_auto_disable:whsub_1:del_1", "events:acme-corp", "events:correlation:webhook_auto_disable:whsub_1:del_1"},
		{"null tenant goes to events:null", "", "", "events:null", ""},
		{"blank correlation id writes no SET", "acme-corp", "  \t", "events:acme-corp", ""},
	}
	st, c, _ := newStore(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.FlushAll(ctx)
			if err := st.SaveEvent(ctx, []byte(storedEvent), evtID, tt.tenant, tt.cid, ts, ttl); err != nil {
				t.Fatalf("SaveEvent: %v", err)
			}
			if got := mustGet(t, c, EventKey(evtID)); got != storedEvent {
				t.Errorf("event:%s = %s", evtID, got)
			}
			if got := ttlSeconds(t, c, EventKey(evtID)); got < 7776000-1 || got > 7776000 {
				t.Errorf("event TTL = %d, want 7776000", got)
			}
			for _, z := range []string{tt.wantTenantKey, "events:_all"} {
				score, err := c.ZScore(ctx, z, evtID).Result()
				if err != nil || int64(score) != ts.UnixMilli() {
					t.Errorf("ZSCORE %s = %v, %v; want %d", z, strconv.FormatFloat(score, 'f', -1, 64), err, ts.UnixMilli())
				}
			}
			correlation := c.Keys(ctx, "events:correlation:*").Val()
			if tt.wantCorrelated == "" {
				if len(correlation) != 0 {
					t.Errorf("correlation keys %v written for a blank correlation id", correlation)
				}
				return
			}
			if !c.SIsMember(ctx, tt.wantCorrelated, evtID).Val() {
				t.Errorf("%s does not contain %s (keys: %v)", tt.wantCorrelated, evtID, correlation)
			}
			if got := ttlSeconds(t, c, tt.wantCorrelated); got < 7776000-1 || got > 7776000 {
				t.Errorf("correlation TTL = %d, want 7776000", got)
			}
		})
	}
}

func TestSaveEvent_RefusesBadInputAndWritesNothing(t *testing.T) {
	tests := []struct {
		name    string
		raw, id string
		ttl     time.Duration
	}{
		{"empty id", storedEvent, "", time.Hour},
		{"zero ttl would delete the event at once", storedEvent, evtID, 0},
		{"not JSON", `{"event_id":`, evtID, time.Hour},
	}
	st, c, _ := newStore(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := st.SaveEvent(ctx, []byte(tt.raw), tt.id, "acme-corp", "", time.Now(), tt.ttl); err == nil {
				t.Fatal("SaveEvent accepted bad input")
			}
			if n := c.DBSize(ctx).Val(); n != 0 {
				t.Fatalf("%d keys written", n)
			}
		})
	}
}
