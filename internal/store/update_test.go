package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/sjson"

	"github.com/jetrelay/jetrelay/proto"
)

const subID = "whsub_3f9a2c1b7d4e8f60"

// adminSub is a subscription as admin writes it, plus what a newer admin
// might add: a field jetrelay does not know and decimals Go would reformat.
const adminSub = `{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","name":"PagerDuty budget alerts","url":"https://hooks.example.com/cycles","event_types":["budget.exhausted"],"headers":{"Authorization":"Bearer tok_abc"},"status":"ACTIVE","retry_policy":{"max_retries":5,"initial_delay_ms":1000,"backoff_multiplier":2.0,"max_delay_ms":60000},"disable_after_failures":10,"consecutive_failures":0,"created_at":"2026-04-01T12:00:00.123456Z","metadata":{"x":1.50,"y":1e2,"z":null},"future_field":{"a":[1,2.50]}}`

const delID = "del_66e435de3e733abc"

const pendingDelivery = `{"delivery_id":"del_66e435de3e733abc","subscription_id":"whsub_3f9a2c1b7d4e8f60","event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","status":"PENDING","attempted_at":"2026-04-01T12:00:00.130211Z","attempts":0,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","trace_flags":"01","traceparent_inbound_valid":false}`

func TestUpdateSubscription_RewritesOnlyThePatchedBytes(t *testing.T) {
	st, c, _ := newStore(t)
	mustSet(t, c, SubscriptionKey(subID), adminSub)
	at := time.Date(2026, 4, 1, 12, 7, 41, 502117000, time.UTC)

	rec, err := st.UpdateSubscription(context.Background(), subID, func(cur *proto.Subscription) (Patch, error) {
		return Patch{
			{"consecutive_failures", cur.ConsecutiveFailures + 3},
			{"status", proto.SubscriptionDisabled},
			{"last_failure_at", at},
			{"last_success_at", nil},
		}, nil
	})
	if err != nil {
		t.Fatalf("UpdateSubscription: %v", err)
	}

	want := strings.Replace(adminSub, `"consecutive_failures":0`, `"consecutive_failures":3`, 1)
	want = strings.Replace(want, `"status":"ACTIVE"`, `"status":"DISABLED"`, 1)
	want = strings.TrimSuffix(want, "}") + `,"last_failure_at":"2026-04-01T12:07:41.502117Z","last_success_at":null}`
	if got := mustGet(t, c, SubscriptionKey(subID)); got != want {
		t.Fatalf("stored record\n got %s\nwant %s", got, want)
	}
	if string(rec.Raw) != want {
		t.Errorf("returned Raw differs from what was stored:\n%s", rec.Raw)
	}
	if rec.Status != proto.SubscriptionDisabled || rec.ConsecutiveFailures != 3 || rec.LastSuccessAt != nil {
		t.Errorf("returned record = status %s, failures %d, last_success_at %v", rec.Status, rec.ConsecutiveFailures, rec.LastSuccessAt)
	}
}

func TestUpdateDelivery_KeepsTheRemainingTTL(t *testing.T) {
	tests := []struct {
		name string
		ttl  time.Duration
		want int64
	}{
		{"delivery with the 14 day TTL keeps it", 1209600 * time.Second, 1209600},
		{"record without TTL stays without one", 0, -1},
	}
	st, c, _ := newStore(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.Set(ctx, DeliveryKey(delID), pendingDelivery, tt.ttl).Err(); err != nil {
				t.Fatal(err)
			}
			_, err := st.UpdateDelivery(ctx, delID, func(cur *proto.Delivery) (Patch, error) {
				return Patch{{"attempts", cur.Attempts + 1}, {"status", proto.DeliveryRetrying}}, nil
			})
			if err != nil {
				t.Fatalf("UpdateDelivery: %v", err)
			}
			got := ttlSeconds(t, c, DeliveryKey(delID))
			if tt.want < 0 && got != tt.want || tt.want > 0 && (got < tt.want-1 || got > tt.want) {
				t.Fatalf("TTL after update = %d, want %d", got, tt.want)
			}
			if s := mustGet(t, c, DeliveryKey(delID)); !strings.Contains(s, `"status":"RETRYING"`) {
				t.Fatalf("update not written: %s", s)
			}
		})
	}
}

func TestUpdateDelivery_MissingKeyIsNotFoundAndNotCreated(t *testing.T) {
	st, c, _ := newStore(t)
	called := false
	_, err := st.UpdateDelivery(context.Background(), delID, func(*proto.Delivery) (Patch, error) {
		called = true
		return Patch{{"status", proto.DeliveryFailed}}, nil
	})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if called {
		t.Error("fn was called for a missing record")
	}
	if n := c.Exists(context.Background(), DeliveryKey(delID)).Val(); n != 0 {
		t.Error("UpdateDelivery created a missing delivery")
	}
}

func TestUpdateDelivery_RecordDeletedBeforeTheWriteIsNotRecreated(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	mustSet(t, c, DeliveryKey(delID), pendingDelivery)
	_, err := st.UpdateDelivery(ctx, delID, func(*proto.Delivery) (Patch, error) {
		c.Del(ctx, DeliveryKey(delID)) // retention or an operator removed it meanwhile
		return Patch{{"status", proto.DeliveryFailed}}, nil
	})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if n := c.Exists(ctx, DeliveryKey(delID)).Val(); n != 0 {
		t.Fatalf("vanished delivery was recreated: %s", mustGet(t, c, DeliveryKey(delID)))
	}
}

func TestUpdateDelivery_WritesNothingWhenFnDeclines(t *testing.T) {
	errStale := errors.New("delivery already terminal")
	tests := []struct {
		name    string
		patch   Patch
		fnErr   error
		wantErr error
	}{
		{"nil patch means no change", nil, nil, nil},
		{"empty patch means no change", Patch{}, nil, nil},
		{"fn error aborts and is returned", Patch{{"status", proto.DeliveryFailed}}, errStale, errStale},
	}
	st, c, _ := newStore(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.Set(ctx, DeliveryKey(delID), pendingDelivery, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			rec, err := st.UpdateDelivery(ctx, delID, func(*proto.Delivery) (Patch, error) { return tt.patch, tt.fnErr })
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got := mustGet(t, c, DeliveryKey(delID)); got != pendingDelivery {
				t.Fatalf("record changed: %s", got)
			}
			if err == nil && (string(rec.Raw) != pendingDelivery || rec.Status != proto.DeliveryPending) {
				t.Errorf("returned record is not the current one: %s", rec.Raw)
			}
		})
	}
}

func TestUpdateDelivery_RefusesAPatchThatWouldMakeTheRecordUnreadable(t *testing.T) {
	st, c, _ := newStore(t)
	mustSet(t, c, DeliveryKey(delID), pendingDelivery)
	_, err := st.UpdateDelivery(context.Background(), delID, func(*proto.Delivery) (Patch, error) {
		return Patch{{"status", "DELIVERED"}}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "unreadable") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if got := mustGet(t, c, DeliveryKey(delID)); got != pendingDelivery {
		t.Fatalf("record changed: %s", got)
	}
}

func TestUpdateAndRead_CorruptRecordIsACorruptErrorAndFnIsNotCalled(t *testing.T) {
	huge := strings.Repeat("9", 10000)
	tests := []struct {
		name string
		raw  string
	}{
		{"truncated JSON", `{"delivery_id":"del_1","status":`},
		{"not an object", `null`},
		{"attempts is a string", `{"delivery_id":"del_1","status":"PENDING","attempts":"three"}`},
		{"unknown status", `{"delivery_id":"del_1","status":"DELIVERED"}`},
		{"huge unparsable instant", `{"delivery_id":"del_1","status":"PENDING","attempted_at":"` + huge + `"}`},
		{"key holds a list", ""},
	}
	st, c, _ := newStore(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := DeliveryKey(delID)
			c.Del(ctx, key)
			if tt.raw == "" {
				c.RPush(ctx, key, "x")
			} else {
				mustSet(t, c, key, tt.raw)
			}

			_, readErr := st.Delivery(ctx, delID)
			called := false
			_, updErr := st.UpdateDelivery(ctx, delID, func(*proto.Delivery) (Patch, error) {
				called = true
				return nil, nil
			})
			for op, err := range map[string]error{"Delivery": readErr, "UpdateDelivery": updErr} {
				var ce *CorruptError
				if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Key != key {
					t.Fatalf("%s err = %v, want *CorruptError for %s", op, err, key)
				}
				if len(err.Error()) > 400 {
					t.Errorf("%s error is %d bytes long; it must not carry the whole record", op, len(err.Error()))
				}
			}
			if called {
				t.Error("fn was called with a corrupt record")
			}
		})
	}
}

func TestUpdateSubscription_ConcurrentIncrementsAreNeverLost(t *testing.T) {
	const workers, perWorker, adminWrites = 32, 25, 50
	st, c, _ := newStore(t)
	ctx := context.Background()
	key := SubscriptionKey(subID)
	mustSet(t, c, key, adminSub)

	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for range workers {
		wg.Go(func() {
			for range perWorker {
				_, err := st.UpdateSubscription(ctx, subID, func(cur *proto.Subscription) (Patch, error) {
					return Patch{{"consecutive_failures", cur.ConsecutiveFailures + 1}}, nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// Admin renames the subscription meanwhile with its own optimistic
	// transaction (WATCH/MULTI), as a PATCH that must not be reverted.
	wg.Go(func() {
		for i := 1; i <= adminWrites; i++ {
			if err := adminRename(ctx, c, key, fmt.Sprintf("renamed %d", i)); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent update failed: %v", err)
	}

	sub, err := proto.ParseSubscription([]byte(mustGet(t, c, key)))
	if err != nil {
		t.Fatal(err)
	}
	if sub.ConsecutiveFailures != workers*perWorker {
		t.Errorf("consecutive_failures = %d, want %d: increments were lost", sub.ConsecutiveFailures, workers*perWorker)
	}
	if want := fmt.Sprintf("renamed %d", adminWrites); sub.Name != want {
		t.Errorf("name = %q, want admin's last write %q", sub.Name, want)
	}
}

// adminRename rewrites the whole record the way admin's own
// compare-and-set writers do, retrying when the record changed underneath.
func adminRename(ctx context.Context, c *redis.Client, key, name string) error {
	for {
		err := c.Watch(ctx, func(tx *redis.Tx) error {
			cur, err := tx.Get(ctx, key).Result()
			if err != nil {
				return err
			}
			next, err := sjson.Set(cur, "name", name)
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, next, 0)
				return nil
			})
			return err
		}, key)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
}

func TestUpdateSubscription_AdminPlainSetBetweenReadAndWriteIsKept(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	key := SubscriptionKey(subID)
	mustSet(t, c, key, adminSub)
	adminVersion := strings.Replace(adminSub, "https://hooks.example.com/cycles", "https://hooks.example.com/v2", 1)

	var calls atomic.Int32
	rec, err := st.UpdateSubscription(ctx, subID, func(cur *proto.Subscription) (Patch, error) {
		if calls.Add(1) == 1 {
			mustSet(t, c, key, adminVersion) // admin PATCH lands after our read
		}
		return Patch{{"consecutive_failures", cur.ConsecutiveFailures + 1}}, nil
	})
	if err != nil {
		t.Fatalf("UpdateSubscription: %v", err)
	}
	if calls.Load() != 2 {
		t.Errorf("fn called %d times, want 2 (a retry on admin's version)", calls.Load())
	}
	want := strings.Replace(adminVersion, `"consecutive_failures":0`, `"consecutive_failures":1`, 1)
	if got := mustGet(t, c, key); got != want {
		t.Fatalf("stored\n got %s\nwant %s", got, want)
	}
	if rec.URL != "https://hooks.example.com/v2" {
		t.Errorf("returned url = %s", rec.URL)
	}
}
