package bridge_test

import (
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/store"
)

func TestDeferred_DueDeliveriesReturnToTheStreamAndFutureOnesWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	st := store.New(e.rdb)
	now := time.Now()
	for _, id := range []string{"del_due0000000000001", "del_due0000000000002"} {
		if err := st.Defer(ctx, id, now.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Defer(ctx, "del_later00000000001", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	b := e.newBridge(t, bridge.Config{InstanceID: "deferred-test"})
	start(t, b)
	eventually(t, 10*time.Second, "due deferred deliveries to be published", func() bool { return e.streamMsgs(t) == 2 })
	left, err := e.rdb.ZRange(ctx, store.DeferredZSet, 0, -1).Result()
	if err != nil || len(left) != 1 || left[0] != "del_later00000000001" {
		t.Fatalf("jetrelay:deferred = %v (%v); want only the future one", left, err)
	}
	// Parking the same delivery again with a new due time brings it back
	// again: a new deferral is a new work item, not a duplicate.
	if err := st.Defer(ctx, "del_due0000000000001", time.Now().Add(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the re-parked delivery to come back", func() bool { return e.streamMsgs(t) == 3 })
	if ids := e.streamIDs(t); ids["del_due0000000000001"] != 2 || ids["del_due0000000000002"] != 1 {
		t.Errorf("stream ids = %v", ids)
	}
	if got := b.Stats().Undeferred; got != 3 {
		t.Errorf("Stats().Undeferred = %d, want 3", got)
	}
}
