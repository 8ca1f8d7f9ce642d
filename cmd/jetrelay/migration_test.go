package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// migrationSub creates a subscription to eventType at path as admin does and
// returns its id and secret.
func (b *bed) migrationSub(t *testing.T, path, eventType string, policy *proto.RetryPolicy, behaviour receiver.Behaviour) (string, string) {
	t.Helper()
	id, secret, err := b.writer.CreateSubscription(context.Background(), admin.Subscription{
		TenantID: "tenant-proc", URL: b.recvBase + path, EventTypes: []string{eventType}, RetryPolicy: policy,
	})
	if err != nil {
		t.Fatal(err)
	}
	b.recv.Handle(path, secret, behaviour)
	b.mux.Handle(path, b.recv)
	return id, secret
}

// inReferenceKeys returns where the reference service would find id:
// "pending", "retry", or "" when neither key holds it.
func (b *bed) inReferenceKeys(t *testing.T, id string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := b.redis.Client.ZScore(ctx, store.RetryZSet, id).Result(); err == nil {
		return "retry"
	}
	if _, err := b.redis.Client.LPos(ctx, store.PendingList, id, redis.LPosArgs{}).Result(); err == nil {
		return "pending"
	}
	return ""
}

func (b *bed) streamMsgs(t *testing.T) uint64 {
	t.Helper()
	nc, err := nats.Connect(b.nats.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(context.Background(), "JETRELAY_DISPATCH")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func (r *relay) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t, 40*time.Second); code != 0 {
		t.Fatalf("jetrelay exited %d after SIGTERM", code)
	}
}

func TestMigration_SwitchOverFromAndRollBackToTheReferenceLoseNothing(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	ctx := context.Background()
	rdb := b.redis.Client
	slowRetry := &proto.RetryPolicy{MaxRetries: ptr(5), InitialDelayMs: ptr(int64(8000)), BackoffMultiplier: ptr(1.0), MaxDelayMs: ptr(int64(8000))}
	b.migrationSub(t, "/ok", "budget.exhausted", nil, receiver.Healthy())
	_, downSecret := b.migrationSub(t, "/down", "budget.funded", slowRetry, receiver.Always(http.StatusServiceUnavailable))
	paused, _ := b.migrationSub(t, "/paused", "budget.frozen", nil, receiver.Healthy())

	// Switch-over: the reference (0.1.25.24) stopped with one delivery queued,
	// one claimed in dispatch:processing by a replica that died ten minutes
	// ago, and one waiting in dispatch:retry.
	ref := b.emit(t, "budget.exhausted", 3)
	rdb.LRem(ctx, store.PendingList, 0, ref[1])
	rdb.LPush(ctx, "dispatch:processing", ref[1])
	rdb.ZAdd(ctx, "dispatch:processing:claimed_at", redis.Z{Score: float64(time.Now().Add(-10 * time.Minute).UnixMilli()), Member: ref[1]})
	rdb.HSet(ctx, "dispatch:processing:claim_owner", ref[1], "token-of-a-dead-replica")
	rdb.LRem(ctx, store.PendingList, 0, ref[2])
	rdb.ZAdd(ctx, store.RetryZSet, redis.Z{Score: float64(time.Now().UnixMilli()), Member: ref[2]})

	r := startRelay(t, b.env())
	b.awaitSuccess(t, ref, 30*time.Second)
	if n, _ := rdb.LLen(ctx, "dispatch:processing").Result(); n != 0 {
		t.Errorf("dispatch:processing still holds %d ids after switch-over", n)
	}

	// Rollback: jetrelay holds a retrying delivery, one of a paused
	// subscription, and (bridge only, no engine) queued ones.
	down := b.emit(t, "budget.funded", 1)
	awaitCondition(t, "the failing delivery to wait for its retry", 30*time.Second, func() bool {
		rec, err := b.store.Delivery(ctx, down[0])
		return err == nil && rec.Status == proto.DeliveryRetrying
	})
	r.stop(t)
	// Admin enqueues only to ACTIVE subscriptions: the pause comes after.
	held := b.emit(t, "budget.frozen", 1)
	if err := b.writer.SetStatus(ctx, paused, proto.SubscriptionPaused); err != nil {
		t.Fatal(err)
	}
	r = startRelay(t, b.env())
	awaitCondition(t, "the paused subscription's delivery to be taken in", 30*time.Second, func() bool { return b.inReferenceKeys(t, held[0]) == "" })
	r.stop(t)

	bridgeOnly := startRelay(t, b.env("JETRELAY_ROLE", "bridge"))
	queued := b.emit(t, "budget.exhausted", 2)
	awaitCondition(t, "the queued deliveries in the stream", 30*time.Second, func() bool {
		return b.inReferenceKeys(t, queued[0]) == "" && b.inReferenceKeys(t, queued[1]) == ""
	})
	if code, out := runBinary(t, b.env(), time.Minute, "handback"); code == 0 || !strings.Contains(out, "still running") {
		t.Fatalf("handback beside a running bridge exited %d:\n%s\nwant a refusal", code, out)
	}
	bridgeOnly.stop(t)

	code, out := runBinary(t, b.env(), time.Minute, "handback")
	if code != 0 {
		t.Fatalf("handback exited %d:\n%s", code, out)
	}
	want := map[string]string{down[0]: "retry", held[0]: "pending", queued[0]: "pending", queued[1]: "pending"}
	for id, key := range want {
		if got := b.inReferenceKeys(t, id); got != key {
			t.Errorf("%s is in %q, want dispatch:%s where the reference reads it", id, got, key)
		}
	}
	if n := b.streamMsgs(t); n != 0 {
		t.Errorf("%d messages left in the dispatch stream after handback", n)
	}
	pending, _ := rdb.LRange(ctx, store.PendingList, 0, -1).Result()
	if slices.ContainsFunc(ref, func(id string) bool { return slices.Contains(pending, id) }) {
		t.Errorf("delivered ids handed back again: %v", pending)
	}
	// Run again: nothing left, nothing doubled.
	if code, out := runBinary(t, b.env(), time.Minute, "handback"); code != 0 || !strings.Contains(out, "handed back: 0 to dispatch:pending, 0 to dispatch:retry") {
		t.Errorf("second handback exited %d:\n%s\nwant nothing to do", code, out)
	}

	// Whoever reads those keys next (the reference, or jetrelay again, which
	// reads them the same way) delivers every one once the endpoints work.
	b.recv.Handle("/down", downSecret, receiver.Healthy())
	if err := b.writer.SetStatus(ctx, paused, proto.SubscriptionActive); err != nil {
		t.Fatal(err)
	}
	startRelay(t, b.env())
	b.awaitSuccess(t, []string{down[0], held[0], queued[0], queued[1]}, 60*time.Second)
}
