package store

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// Outcomes that arrive while one is being written go out together in the
// next script call, each compared and written on its own: successes and
// failures of two subscriptions, several failures of one subscription in
// the same call among them (all but one find the record another wrote,
// are read again and retried), all land, and every failure is counted
// exactly once.
func TestRecordOutcome_OutcomesThatComeTogetherAreWrittenInOneScriptCall(t *testing.T) {
	env := testenv.Redis(t)
	st := New(env.Client)
	if st.outcomes == nil {
		t.Fatal("a plain client's store has no group commit of outcomes")
	}
	ctx := context.Background()
	subs := []string{subID, "whsub_second"}
	for _, s := range subs {
		env.Client.Set(ctx, SubscriptionKey(s), strings.Replace(adminSub, subID, s, 1), 0)
	}
	const n = 24
	recs := make([]*DeliveryRecord, n)
	for i := range n {
		id := fmt.Sprintf("del_batched%06d", i)
		raw := strings.Replace(strings.Replace(pendingDelivery, delID, id, 1), subID, subs[i%2], 1)
		env.Client.Set(ctx, DeliveryKey(id), raw, time.Hour)
		r, err := st.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = r
	}
	succeeded := func(d *proto.Delivery, _ *proto.Subscription) (Patch, Patch, error) {
		if d.Status.Terminal() {
			return nil, nil, nil
		}
		return Patch{{Name: "status", Value: proto.DeliverySuccess}}, nil, nil
	}
	// The first outcome's write waits until every other caller is queued
	// behind it; the sizes of the batches written are kept.
	first := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var sizes []int
	st.outcomes.batch.BeforeWrite = func(size int) {
		mu.Lock()
		sizes = append(sizes, size)
		mu.Unlock()
		once.Do(func() {
			close(first)
			for st.outcomes.batch.Waiting() < n-2 {
				runtime.Gosched()
			}
		})
	}
	var wg sync.WaitGroup
	failures := map[string]int{}
	run := func(i int) {
		fn := OutcomeFunc(succeeded)
		if i%4 < 2 {
			fn = failedAndCounted
			failures[subs[i%2]]++
		}
		raw, _ := env.Client.Get(ctx, SubscriptionKey(subs[i%2])).Bytes()
		wg.Go(func() {
			if _, err := st.RecordOutcome(ctx, recs[i], raw, fn); err != nil {
				t.Errorf("%s: %v", recs[i].DeliveryID, err)
			}
		})
	}
	run(1)
	<-first
	for i := 2; i < n; i++ {
		run(i)
	}
	wg.Wait()
	// The first outcome alone, then the 22 queued behind it in one call;
	// after that only the retries of those that found their subscription
	// changed by another in the batch.
	if len(sizes) < 2 || sizes[0] != 1 || sizes[1] != n-2 {
		t.Errorf("batches written: %v, want 1, then %d, then only retries", sizes, n-2)
	}
	for i := 1; i < n; i++ {
		want := `"status":"SUCCESS"`
		if i%4 < 2 {
			want = `"status":"FAILED"`
		}
		if got := env.Client.Get(ctx, DeliveryKey(recs[i].DeliveryID)).Val(); !strings.Contains(got, want) {
			t.Errorf("%s: %s, want %s", recs[i].DeliveryID, got, want)
		}
	}
	for s, c := range failures {
		raw, _ := env.Client.Get(ctx, SubscriptionKey(s)).Bytes()
		sub, err := proto.ParseSubscription(raw)
		if err != nil {
			t.Fatal(err)
		}
		if sub.ConsecutiveFailures != c {
			t.Errorf("%s: consecutive_failures = %d, want exactly %d", s, sub.ConsecutiveFailures, c)
		}
	}
}
