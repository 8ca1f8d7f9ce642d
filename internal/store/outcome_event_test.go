package store

import (
	"context"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/testenv"
)

func TestRecordOutcomeAndSave_SavesTheEventWithTheOutcomeAndNeverTwice(t *testing.T) {
	env := testenv.Redis(t)
	st := New(env.Client)
	rec := seedPair(t, st, env)
	ctx := context.Background()
	ts := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	ev := &NewEvent{Raw: []byte(`{"event_id":"evt_0000000000000001"}`), EventID: "evt_0000000000000001", TenantID: "__system__",
		CorrelationID: "webhook_delivery_failed:" + subID + ":" + delID, Timestamp: ts, TTL: time.Hour}
	for i := range 2 {
		// The second call finds the delivery final: nothing to write, no event.
		wrote, err := st.RecordOutcomeAndSave(ctx, rec, []byte(adminSub), failedAndCounted, ev)
		if err != nil || wrote != (i == 0) {
			t.Fatalf("call %d: RecordOutcomeAndSave = %v, %v", i+1, wrote, err)
		}
	}
	if got, _ := env.Client.Get(ctx, EventKey(ev.EventID)).Result(); got != string(ev.Raw) {
		t.Errorf("event:{id} = %q", got)
	}
	if ttl, _ := env.Client.TTL(ctx, EventKey(ev.EventID)).Result(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("event TTL %s, want up to an hour", ttl)
	}
	for _, key := range []string{"events:__system__", "events:_all"} {
		score, err := env.Client.ZScore(ctx, key, ev.EventID).Result()
		if err != nil || int64(score) != ts.UnixMilli() {
			t.Errorf("%s score = %v, %v; want the event's timestamp", key, score, err)
		}
		if n, _ := env.Client.ZCard(ctx, key).Result(); n != 1 {
			t.Errorf("%s holds %d events, want 1", key, n)
		}
	}
	if ok, _ := env.Client.SIsMember(ctx, "events:correlation:"+ev.CorrelationID, ev.EventID).Result(); !ok {
		t.Errorf("event not indexed under its correlation id")
	}
}

func TestRecordOutcomeAndSave_SavesNoEventWhenTheDeliveryVanished(t *testing.T) {
	env := testenv.Redis(t)
	st := New(env.Client)
	rec := seedPair(t, st, env)
	ctx := context.Background()
	env.Client.Del(ctx, DeliveryKey(delID))
	ev := &NewEvent{Raw: []byte(`{}`), EventID: "evt_0000000000000002", TenantID: "__system__", Timestamp: time.Now(), TTL: time.Hour}
	if _, err := st.RecordOutcomeAndSave(ctx, rec, []byte(adminSub), failedAndCounted, ev); err == nil {
		t.Fatal("want an error for a vanished delivery")
	}
	if n, _ := env.Client.Exists(ctx, EventKey(ev.EventID), "events:__system__").Result(); n != 0 {
		t.Errorf("the event was saved without its outcome")
	}
}
