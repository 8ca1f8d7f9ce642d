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

// scriptCalls is how many script calls Redis has run.
func scriptCalls(t *testing.T, env *testenv.RedisEnv) int64 {
	t.Helper()
	var n int64
	for line := range strings.SplitSeq(env.Client.Info(context.Background(), "commandstats").Val(), "\r\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if v, ok := strings.CutPrefix(line, cmd); ok {
				var c int64
				fmt.Sscan(strings.SplitN(v, ",", 2)[0], &c)
				n += c
			}
		}
	}
	return n
}

// Outcomes that arrive while one is being written go out together in the
// next script call, each compared and written on its own: successes and
// failures of two subscriptions, two failures of one subscription in the
// same call among them (the second finds the record the first wrote, is
// read again and retried), all land, every failure counted exactly once,
// and the callers queued behind the first write take two script calls,
// not one each.
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
	if scriptCalls(t, env) == 0 {
		// Load the script, so the counts below are the outcomes' calls.
		if _, err := st.RecordOutcome(ctx, recs[0], nil, succeeded); err != nil {
			t.Fatal(err)
		}
	}
	// The first outcome's write waits until every other caller is queued
	// behind it.
	first := make(chan struct{})
	var once sync.Once
	st.outcomes.beforeWrite = func() {
		once.Do(func() {
			close(first)
			for st.outcomes.waiting() < n-2 {
				runtime.Gosched()
			}
		})
	}
	before := scriptCalls(t, env)
	var wg sync.WaitGroup
	run := func(r *DeliveryRecord, fn OutcomeFunc, subRaw []byte) {
		wg.Go(func() {
			if _, err := st.RecordOutcome(ctx, r, subRaw, fn); err != nil {
				t.Errorf("%s: %v", r.DeliveryID, err)
			}
		})
	}
	outcome := func(i int) (OutcomeFunc, []byte) {
		raw, _ := env.Client.Get(ctx, SubscriptionKey(subs[i%2])).Bytes()
		if i%4 < 2 {
			return failedAndCounted, raw
		}
		return succeeded, raw
	}
	fn, raw := outcome(1)
	run(recs[1], fn, raw)
	<-first
	for i := 2; i < n; i++ {
		fn, raw := outcome(i)
		run(recs[i], fn, raw)
	}
	wg.Wait()
	calls := scriptCalls(t, env) - before
	// One call for the first, one for the 22 behind it, and one more for
	// each outcome that found its subscription changed by another in its
	// batch and was retried on its own.
	failures := map[string]int{}
	for i := 1; i < n; i++ {
		if i%4 < 2 {
			failures[subs[i%2]]++
		}
	}
	retriedAtMost := int64(0)
	for _, c := range failures {
		retriedAtMost += int64(c - 1)
	}
	if calls < 2 || calls > 2+retriedAtMost {
		t.Errorf("%d outcomes took %d script calls, want 2 and at most %d retries", n-1, calls, retriedAtMost)
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
