package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// failedAndCounted is the engine's exhausted-failure write: the delivery
// becomes FAILED and its subscription counts one more failure, together.
func failedAndCounted(d *proto.Delivery, sub *proto.Subscription) (Patch, Patch, error) {
	if d.Status.Terminal() {
		return nil, nil, nil
	}
	dp := Patch{{Name: "status", Value: proto.DeliveryFailed}, {Name: "attempts", Value: d.Attempts + 1}}
	if sub == nil {
		return dp, nil, nil
	}
	return dp, Patch{{Name: "consecutive_failures", Value: sub.ConsecutiveFailures + 1}}, nil
}

func seedPair(t *testing.T, st *Store, env *testenv.RedisEnv) *DeliveryRecord {
	t.Helper()
	ctx := context.Background()
	env.Client.Set(ctx, SubscriptionKey(subID), adminSub, 0)
	env.Client.Set(ctx, DeliveryKey(delID), pendingDelivery, 1209600*time.Second)
	rec, err := st.Delivery(ctx, delID)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestRecordOutcome_WritesDeliveryAndSubscriptionTogetherLosslessly(t *testing.T) {
	env := testenv.Redis(t)
	st := New(env.Client)
	rec := seedPair(t, st, env)
	ctx := context.Background()
	wrote, err := st.RecordOutcome(ctx, rec, []byte(adminSub), failedAndCounted)
	if err != nil || !wrote {
		t.Fatalf("RecordOutcome = %v, %v", wrote, err)
	}
	sub, _ := env.Client.Get(ctx, SubscriptionKey(subID)).Result()
	if want := strings.Replace(adminSub, `"consecutive_failures":0`, `"consecutive_failures":1`, 1); sub != want {
		t.Errorf("subscription:\n got %s\nwant %s", sub, want)
	}
	del, _ := env.Client.Get(ctx, DeliveryKey(delID)).Result()
	if !strings.Contains(del, `"status":"FAILED"`) || !strings.Contains(del, `"traceparent_inbound_valid":false`) {
		t.Errorf("delivery: %s", del)
	}
	if ttl, _ := env.Client.TTL(ctx, DeliveryKey(delID)).Result(); ttl < 1209590*time.Second {
		t.Errorf("delivery TTL %s not kept", ttl)
	}
	// A second call sees the final state and writes nothing: no double count.
	if wrote, err := st.RecordOutcome(ctx, rec, []byte(adminSub), failedAndCounted); err != nil || wrote {
		t.Fatalf("repeat RecordOutcome = %v, %v; want nothing written", wrote, err)
	}
	if s, _ := env.Client.Get(ctx, SubscriptionKey(subID)).Result(); !strings.Contains(s, `"consecutive_failures":1`) {
		t.Errorf("failure counted twice: %s", s)
	}
}

func TestRecordOutcome_AdminWriteInBetweenIsKeptAndTheCountStillLands(t *testing.T) {
	env := testenv.Redis(t)
	st := New(env.Client)
	rec := seedPair(t, st, env)
	ctx := context.Background()
	// Admin renames the subscription after the engine read it.
	renamed := strings.Replace(adminSub, "PagerDuty budget alerts", "Renamed", 1)
	env.Client.Set(ctx, SubscriptionKey(subID), renamed, 0)
	if _, err := st.RecordOutcome(ctx, rec, []byte(adminSub), failedAndCounted); err != nil {
		t.Fatal(err)
	}
	sub, _ := env.Client.Get(ctx, SubscriptionKey(subID)).Result()
	if !strings.Contains(sub, `"name":"Renamed"`) || !strings.Contains(sub, `"consecutive_failures":1`) {
		t.Errorf("lost an update: %s", sub)
	}
}

func TestRecordOutcome_MissingSubscriptionStillRecordsTheDelivery(t *testing.T) {
	env := testenv.Redis(t)
	st := New(env.Client)
	rec := seedPair(t, st, env)
	ctx := context.Background()
	env.Client.Del(ctx, SubscriptionKey(subID))
	if wrote, err := st.RecordOutcome(ctx, rec, []byte(adminSub), failedAndCounted); err != nil || !wrote {
		t.Fatalf("RecordOutcome = %v, %v", wrote, err)
	}
	if n, _ := env.Client.Exists(ctx, SubscriptionKey(subID)).Result(); n != 0 {
		t.Error("a deleted subscription was recreated")
	}
	if d, _ := env.Client.Get(ctx, DeliveryKey(delID)).Result(); !strings.Contains(d, `"status":"FAILED"`) {
		t.Errorf("delivery not recorded: %s", d)
	}
}

func TestRecordOutcome_VanishedDeliveryIsNotFoundAndNothingIsWritten(t *testing.T) {
	env := testenv.Redis(t)
	st := New(env.Client)
	rec := seedPair(t, st, env)
	ctx := context.Background()
	env.Client.Del(ctx, DeliveryKey(delID))
	_, err := st.RecordOutcome(ctx, rec, []byte(adminSub), failedAndCounted)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if n, _ := env.Client.Exists(ctx, DeliveryKey(delID)).Result(); n != 0 {
		t.Error("vanished delivery recreated")
	}
	if s, _ := env.Client.Get(ctx, SubscriptionKey(subID)).Result(); s != adminSub {
		t.Errorf("subscription changed although the delivery was gone: %s", s)
	}
}

func TestRecordOutcome_ConcurrentFailuresOnOneSubscriptionAreCountedExactly(t *testing.T) {
	t.Run("autopipelined", func(t *testing.T) {
		env := testenv.Redis(t)
		testConcurrentFailuresCounted(t, env, New(env.Client))
	})
	t.Run("pipelined per call", func(t *testing.T) {
		env := testenv.Redis(t)
		testConcurrentFailuresCounted(t, env, New(otherClient{env.Client}))
	})
}

func testConcurrentFailuresCounted(t *testing.T, env *testenv.RedisEnv, st *Store) {
	ctx := context.Background()
	env.Client.Set(ctx, SubscriptionKey(subID), adminSub, 0)
	const n = 48
	recs := make([]*DeliveryRecord, n)
	for i := range n {
		id := fmt.Sprintf("del_concurrent%06d", i)
		env.Client.Set(ctx, DeliveryKey(id), strings.Replace(pendingDelivery, delID, id, 1), time.Hour)
		r, err := st.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = r
	}
	var wg sync.WaitGroup
	for _, r := range recs {
		wg.Go(func() {
			if _, err := st.RecordOutcome(ctx, r, []byte(adminSub), failedAndCounted); err != nil {
				t.Errorf("%s: %v", r.DeliveryID, err)
			}
		})
	}
	wg.Wait()
	raw, _ := env.Client.Get(ctx, SubscriptionKey(subID)).Bytes()
	sub, err := proto.ParseSubscription(raw)
	if err != nil {
		t.Fatal(err)
	}
	if sub.ConsecutiveFailures != n {
		t.Errorf("consecutive_failures = %d, want exactly %d", sub.ConsecutiveFailures, n)
	}
}

// An outcome that leaves the subscription alone (a success, most
// outcomes) sends only the delivery's bytes: the script compares and
// writes the subscription only when it changes, so its record stays out
// of the call, however large admin made it. One that counts a failure
// still writes both together.
func TestRecordOutcome_SendsTheSubscriptionOnlyWhenItWritesIt(t *testing.T) {
	env := testenv.Redis(t)
	st := New(env.Client)
	ctx := context.Background()
	padding := strings.Repeat("p", 32<<10)
	bigSub := strings.Replace(adminSub, `"future_field":`, `"notes":"`+padding+`","future_field":`, 1)
	env.Client.Set(ctx, SubscriptionKey(subID), bigSub, 0)
	env.Client.Set(ctx, DeliveryKey(delID), pendingDelivery, 0)
	rec, err := st.Delivery(ctx, delID)
	if err != nil {
		t.Fatal(err)
	}
	netIn := func() int64 {
		for line := range strings.SplitSeq(env.Client.Info(ctx, "stats").Val(), "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_net_input_bytes:"); ok {
				var n int64
				fmt.Sscan(v, &n)
				return n
			}
		}
		t.Fatal("INFO stats gives no total_net_input_bytes")
		return 0
	}
	succeeded := func(d *proto.Delivery, _ *proto.Subscription) (Patch, Patch, error) {
		return Patch{{Name: "status", Value: proto.DeliverySuccess}}, nil, nil
	}
	before := netIn()
	if wrote, err := st.RecordOutcome(ctx, rec, []byte(bigSub), succeeded); err != nil || !wrote {
		t.Fatalf("RecordOutcome = %v, %v", wrote, err)
	}
	if sent := netIn() - before; sent > int64(len(padding)) {
		t.Errorf("a success sent %d bytes to Redis: the %d-byte subscription went with it", sent, len(bigSub))
	}
	if del, _ := env.Client.Get(ctx, DeliveryKey(delID)).Result(); !strings.Contains(del, `"status":"SUCCESS"`) {
		t.Errorf("delivery: %s", del)
	}
	if sub, _ := env.Client.Get(ctx, SubscriptionKey(subID)).Result(); sub != bigSub {
		t.Errorf("a success changed the subscription")
	}

	env.Client.Set(ctx, DeliveryKey(delID), pendingDelivery, 0)
	if rec, err = st.Delivery(ctx, delID); err != nil {
		t.Fatal(err)
	}
	if wrote, err := st.RecordOutcome(ctx, rec, []byte(bigSub), failedAndCounted); err != nil || !wrote {
		t.Fatalf("RecordOutcome = %v, %v", wrote, err)
	}
	if sub, _ := env.Client.Get(ctx, SubscriptionKey(subID)).Result(); sub != strings.Replace(bigSub, `"consecutive_failures":0`, `"consecutive_failures":1`, 1) {
		t.Errorf("the failure was not counted in the subscription")
	}
}
