package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

// TestRun_EmbeddedReplicasOnOneRedisAreCalledSeparateQueues: two replicas
// without NATS_URL on one Redis each run an embedded JetStream, so each is a
// queue of its own. The second says so loudly at start-up, and `jetrelay
// status` shows it; one replica alone gets no such warning.
func TestRun_EmbeddedReplicasOnOneRedisAreCalledSeparateQueues(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	embedded := func(id string) map[string]string {
		env := b.env("JETRELAY_BRIDGE_ID", id)
		delete(env, "NATS_URL")
		return env
	}
	first := startRelay(t, embedded("replica-a"))
	first.awaitHTTP(t, "/readyz", 200, 30*time.Second)
	statusEnv := embedded("replica-a")
	statusEnv["JETRELAY_MANAGEMENT_URLS"] = first.mgmt
	if code, out := runBinary(t, statusEnv, 30*time.Second, "status"); code != 0 || strings.Contains(out, "separate queue") {
		t.Errorf("status with one embedded replica exited %d and warned:\n%s", code, out)
	}
	if strings.Contains(first.logs.String(), "SEPARATE QUEUES") {
		t.Errorf("the only replica warned about separate queues:\n%s", first.logs.tail(2<<10))
	}

	second := startRelay(t, embedded("replica-b"))
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(second.logs.String(), "SEPARATE QUEUES") {
		if time.Now().After(deadline) {
			t.Fatalf("the second embedded replica did not warn at start-up:\n%s", second.logs.tail(4<<10))
		}
		time.Sleep(50 * time.Millisecond)
	}
	logs := second.logs.String()
	for _, want := range []string{"replica-a", "replica-b", "NATS_URL", "level=ERROR"} {
		if !strings.Contains(logs, want) {
			t.Errorf("start-up warning does not mention %q:\n%s", want, second.logs.tail(4<<10))
		}
	}
	second.awaitHTTP(t, "/readyz", 200, 30*time.Second)
	code, out := runBinary(t, statusEnv, 30*time.Second, "status")
	if code != 0 || !strings.Contains(out, "WARNING") || !strings.Contains(out, "separate queue") {
		t.Errorf("status with two embedded replicas exited %d without the separate-queue warning:\n%s", code, out)
	}
}

// TestRun_AProcessingListWhoseBridgeNeverComesBackIsAdopted: a pod of a
// Deployment (a bridge id from a random pod name) vanished with ids moved
// out of dispatch:pending and not yet published. Its id never runs again;
// a replica with another id adopts the list once the heartbeat has expired
// and every delivery goes out.
func TestRun_AProcessingListWhoseBridgeNeverComesBackIsAdopted(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	_, ep := b.endpoint(t, "/hook", "budget.exhausted", nil)
	ids := b.emit(t, "budget.exhausted", 4)
	ctx := t.Context()
	const gone = "jetrelay-6f9c7d5b8-x2k4q"
	rdb := b.redis.Client
	for range ids {
		if err := rdb.LMove(ctx, store.PendingList, store.ProcessingList(gone), "RIGHT", "LEFT").Err(); err != nil {
			t.Fatalf("move to the vanished bridge's list: %v", err)
		}
	}
	// It was alive a moment ago: its heartbeat still runs for 2 s.
	if err := b.store.Beat(ctx, gone, "pid=1 queue=nats", 2*time.Second); err != nil {
		t.Fatal(err)
	}

	startRelay(t, b.env("JETRELAY_BRIDGE_ID", "jetrelay-6f9c7d5b8-new01"))
	b.awaitSuccess(t, ids, 60*time.Second)
	if st := ep.Stats(); st.Unique != len(ids) {
		t.Errorf("receiver got %d distinct events, want %d", st.Unique, len(ids))
	}
	if n, _ := rdb.LLen(ctx, store.ProcessingList(gone)).Result(); n != 0 {
		t.Errorf("the vanished bridge's list still holds %d ids", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := rdb.SIsMember(ctx, store.BridgesSet, gone).Result()
		if err == nil && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the vanished bridge is still in the registry (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
