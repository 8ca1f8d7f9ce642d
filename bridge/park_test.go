package bridge_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// setRecord writes delivery:{id} for sub as admin writes a new one
// (attempts 0, PENDING) or, with attempts > 0, as a retrying one.
func (e *env) setRecord(t *testing.T, id, sub string, attempts int, attemptedAt time.Time) {
	t.Helper()
	status := proto.DeliveryPending
	if attempts > 0 {
		status = proto.DeliveryRetrying
	}
	at := proto.Instant{Time: attemptedAt}
	raw, err := json.Marshal(proto.Delivery{DeliveryID: id, SubscriptionID: sub, EventID: "evt_1", Status: status, Attempts: attempts, AttemptedAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.Set(context.Background(), "delivery:"+id, raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

func (e *env) parked(t *testing.T, sub string) map[string]time.Time {
	t.Helper()
	zs, err := e.rdb.ZRangeWithScores(context.Background(), store.ParkedZSet(sub), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]time.Time, len(zs))
	for _, z := range zs {
		out[z.Member.(string)] = time.UnixMilli(int64(z.Score))
	}
	return out
}

func hold(until time.Time, span, grace time.Duration) store.IntakeHold {
	return store.IntakeHold{Reason: "breaker_open", Since: time.Now(), Until: until, Span: span, Grace: grace}
}

func TestRun_ParksNeverSentDeliveriesOfAHeldSubscriptionUntilItsHoldIsCleared(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	st := store.New(e.rdb)
	now := time.Now()
	bad, good := ids("del_bad", 10), ids("del_good", 10)
	var queued []string
	for i := range bad {
		e.setRecord(t, bad[i], "whsub_bad", 0, now)
		e.setRecord(t, good[i], "whsub_good", 0, now)
		queued = append(queued, bad[i], good[i])
	}
	// A retry of the held subscription keeps its own wake-up: never parked.
	e.setRecord(t, "del_bad_retry", "whsub_bad", 2, now.Add(-time.Minute))
	queued = append(queued, "del_bad_retry")
	if err := st.SetIntakeHold(ctx, "whsub_bad", hold(now.Add(time.Hour), 2*time.Hour, time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Nor is a redrive made since the hold began: fresh evidence the
	// engine must see.
	requeued := proto.Instant{Time: time.Now()}
	raw, _ := json.Marshal(proto.Delivery{DeliveryID: "del_bad_requeued", SubscriptionID: "whsub_bad", EventID: "evt_1", Status: proto.DeliveryPending, AttemptedAt: &requeued, RequeuedAt: &requeued})
	if err := e.rdb.Set(ctx, "delivery:del_bad_requeued", raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
	queued = append(queued, "del_bad_requeued")
	e.lpush(t, "dispatch:pending", queued)
	b := e.newBridge(t, bridge.Config{RetryPoll: 50 * time.Millisecond})
	start(t, b)

	eventually(t, 10*time.Second, "the healthy and the retrying deliveries published, the held ones parked", func() bool {
		return e.streamMsgs(t) == 12 && len(e.parked(t, "whsub_bad")) == 10 && e.llens(t, "dispatch:pending", "dispatch:processing:test-bridge") == 0
	})
	inStream := e.streamIDs(t)
	for _, id := range append(good, "del_bad_retry", "del_bad_requeued") {
		if inStream[id] != 1 {
			t.Errorf("%s stored %d times, want once", id, inStream[id])
		}
	}
	for id, due := range e.parked(t, "whsub_bad") {
		if want := now.Add(2 * time.Hour); due.Sub(want).Abs() > time.Millisecond {
			t.Errorf("%s parked until %s, want its attempted_at plus the hold's span (%s)", id, due, want)
		}
		// The record says why and until when it waits, as the engine's
		// own put-offs write it.
		rec, err := st.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Waiting == nil || *rec.Waiting != "breaker_open" || rec.NextRetryAt == nil || !rec.NextRetryAt.Equal(due) || rec.Attempts != 0 || rec.Status != proto.DeliveryPending {
			t.Errorf("parked record = %s; want jetrelay_waiting breaker_open and next_retry_at %s, still PENDING with no attempt", rec.Raw, due)
		}
	}

	// A success clears the hold: everything parked goes back, once.
	if err := st.ClearIntakeHold(ctx, "whsub_bad"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the parked deliveries published after the hold ended", func() bool {
		return e.streamMsgs(t) == 22
	})
	inStream = e.streamIDs(t)
	for _, id := range queued {
		if inStream[id] != 1 {
			t.Errorf("%s stored %d times, want once", id, inStream[id])
		}
	}
	for _, id := range bad {
		// A note naming a future time would make the engine put the
		// delivery off again as an early copy.
		if rec, err := st.Delivery(ctx, id); err != nil || rec.Waiting != nil || rec.NextRetryAt != nil {
			t.Errorf("released record = %s (%v); want its wait note gone", rec.Raw, err)
		}
	}
	if n, err := e.rdb.SCard(ctx, store.ParkedSubscriptions).Result(); err != nil || n != 0 {
		t.Errorf("%s holds %d subscriptions (%v), want none once nothing is parked", store.ParkedSubscriptions, n, err)
	}
	if s := b.Stats(); s.Parked != 10 || s.Unparked != 10 || s.Published != 22 {
		t.Errorf("stats %+v, want 10 parked, 10 unparked, 22 published", s)
	}
}

func TestRun_PutsAParkedDeliveryBackWhenItsScheduleEndsWhileTheHoldLasts(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	st := store.New(e.rdb)
	now := time.Now()
	span := time.Hour
	// Its schedule ends 3 s from now: parked, then back by then for its
	// last-chance send. The other one's ends in an hour.
	e.setRecord(t, "del_old", "whsub_bad", 0, now.Add(-span+3*time.Second))
	e.setRecord(t, "del_new", "whsub_bad", 0, now)
	// One whose schedule ends within a second is not parked at all.
	e.setRecord(t, "del_due", "whsub_bad", 0, now.Add(-span+500*time.Millisecond))
	if err := st.SetIntakeHold(ctx, "whsub_bad", hold(now.Add(time.Hour), span, time.Minute)); err != nil {
		t.Fatal(err)
	}
	e.lpush(t, "dispatch:pending", []string{"del_old", "del_new", "del_due"})
	start(t, e.newBridge(t, bridge.Config{RetryPoll: 50 * time.Millisecond}))

	eventually(t, 10*time.Second, "del_due published and the other two parked", func() bool {
		return e.streamMsgs(t) == 1 && len(e.parked(t, "whsub_bad")) == 2
	})
	eventually(t, 10*time.Second, "del_old back at its schedule's end", func() bool {
		return e.streamMsgs(t) == 2
	})
	if time.Now().Before(now.Add(3 * time.Second)) {
		t.Errorf("del_old went back before its schedule ended")
	}
	in := e.streamIDs(t)
	if in["del_old"] != 1 || in["del_due"] != 1 || in["del_new"] != 0 {
		t.Errorf("stream holds %v, want del_old and del_due once, del_new still parked", in)
	}
	if p := e.parked(t, "whsub_bad"); len(p) != 1 || p["del_new"].IsZero() {
		t.Errorf("parked %v, want del_new alone", p)
	}
}

func TestRun_ProbesWithOneParkedDeliveryAtATimeOnceAHoldLapsesAndDropsItAfterItsGrace(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	st := store.New(e.rdb)
	now := time.Now()
	bad := ids("del_bad", 30)
	for _, id := range bad {
		e.setRecord(t, id, "whsub_bad", 0, now)
	}
	// No engine renews it: it lapses in 1.5 s, then its grace of 2 s runs.
	if err := st.SetIntakeHold(ctx, "whsub_bad", hold(now.Add(1500*time.Millisecond), time.Hour, 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.lpush(t, "dispatch:pending", bad)
	start(t, e.newBridge(t, bridge.Config{RetryPoll: 200 * time.Millisecond}))

	eventually(t, 10*time.Second, "all thirty parked", func() bool { return len(e.parked(t, "whsub_bad")) == 30 })
	eventually(t, 10*time.Second, "a first probe back once the hold lapsed", func() bool { return e.streamMsgs(t) > 0 })
	if n := e.streamMsgs(t); n > 2 {
		t.Errorf("%d parked deliveries went back at the first polls after the hold lapsed, want one per poll", n)
	}
	eventually(t, 10*time.Second, "everything back once the grace ran out", func() bool { return e.streamMsgs(t) == 30 })
	if time.Now().Before(now.Add(3500 * time.Millisecond)) {
		t.Errorf("everything went back before the hold's grace ended")
	}
	if _, ok, err := st.IntakeHoldOf(ctx, "whsub_bad"); err != nil || ok {
		t.Errorf("the lapsed hold is still there (err %v), want it dropped", err)
	}
}
