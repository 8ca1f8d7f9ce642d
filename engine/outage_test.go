package engine_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/redisproc"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// ackPending is the shared consumer's NumAckPending (-1 when unreadable).
func (e *env) ackPending() int {
	ctx := context.Background()
	c, err := e.js.Consumer(ctx, e.qc.Stream, e.qc.Consumer)
	if err != nil {
		return -1
	}
	info, err := c.Info(ctx)
	if err != nil {
		return -1
	}
	return info.NumAckPending
}

// allScheduled reports whether every delivery in ids has a pending wake-up.
func (e *env) allScheduled(ids []string) bool {
	for _, id := range ids {
		if ok, _ := queue.IsScheduled(context.Background(), e.js, e.qc, id); !ok {
			return false
		}
	}
	return true
}

func TestRedisOutage_DeliveriesWaitAsWakeUpsHoldingNoAckPendingSlotAndAllSucceedAfterwards(t *testing.T) {
	t.Parallel()
	const n = 6 // fewer than the workers: every one is mid-send when Redis dies
	release := make(chan struct{})
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		<-release
		w.WriteHeader(http.StatusOK)
	})
	e := newEnv(t, envOptions{handler: h, redis: redisproc.Options{AppendOnly: true}, engine: func(c *engine.Config) {
		// Long enough that a delayed nak would visibly hold its slot.
		c.InfraRetryMin, c.InfraRetryMax = time.Second, 3*time.Second
		// A new subscription's adaptive limit starts at a quarter of the
		// workers: 24 let all six sends run at once.
		c.Workers = 24
	}})
	sub, _, _ := e.subscribe(t, "/custom/outage", nil, nil)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.deliver(t, sub, e.event(), nil)
	}
	select {
	case <-all: // every delivery is read and mid-send
	case <-time.After(20 * time.Second):
		t.Fatal("the deliveries never reached the endpoint")
	}
	if err := e.redis.Server.Kill(); err != nil { // a crash; the AOF keeps what was written
		t.Fatal(err)
	}
	close(release) // the sends succeed, but their outcomes cannot be written

	// While Redis is down, each delivery waits as a JetStream wake-up and
	// its work item is acked: no MaxAckPending slot is held for the outage.
	waitFor(t, 20*time.Second, "every delivery to wait as a wake-up with no work item awaiting an ack", func() bool {
		return e.allScheduled(ids) && e.ackPending() == 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.redis.Client.Ping(ctx).Err(); err == nil {
		t.Fatal("Redis answered during the outage; the test did not test an outage")
	}
	if err := e.redis.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Errorf("after the outage delivery %s is %s, want SUCCESS: %s", id, rec.Status, rec.Raw)
		}
	}
	e.idle(t)
}

func TestNewSubscriptionWithoutItsSecretYet_DeliveryWaitsAsAWakeUpNotAnAckPendingSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/new", receiver.Always(http.StatusOK), func(s *admin.Subscription) {
		s.CreatedAt = time.Now() // just created: admin's secret write may still be on its way
	})
	ctx := context.Background()
	key := store.SecretKey(sub)
	stored, err := e.redis.Client.Get(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	e.redis.Client.Del(ctx, key)
	id := e.deliver(t, sub, e.event(), nil)

	waitFor(t, 20*time.Second, "the delivery to wait for its secret as a wake-up, with no work item awaiting an ack", func() bool {
		return e.allScheduled([]string{id}) && e.ackPending() == 0
	})
	if got := ep.Stats().Requests; got != 0 {
		t.Fatalf("%d requests sent before the secret was stored; want none (never unsigned)", got)
	}
	if err := e.redis.Client.Set(ctx, key, stored, 0).Err(); err != nil { // admin's secret write lands
		t.Fatal(err)
	}
	if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
		t.Fatalf("delivery is %s once its secret is stored, want SUCCESS: %s", rec.Status, rec.Raw)
	}
	if st := ep.Stats(); st.Accepted != 1 || st.BadSig != 0 {
		t.Errorf("endpoint saw %+v; want one request, signed with the subscription's secret", st)
	}
}
