package store

import (
	"context"
	"slices"
	"testing"
	"time"
)

// The bridge's moves go through these: ids move oldest first, adoption
// stops at a live owner, and a dead, empty bridge leaves the registry.
func TestDispatch_MovesAdoptsAndForgetsBridgesByTheirKeys(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	c.LPush(ctx, PendingList, "a", "b", "c") // "a" is the oldest
	ids, err := st.MovePending(ctx, ProcessingList("me"), 2)
	if err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("MovePending = %q, %v; want the two oldest, a and b", ids, err)
	}
	if got, _ := c.LRange(ctx, "dispatch:processing:me", 0, -1).Result(); len(got) != 2 {
		t.Errorf("processing list dispatch:processing:me = %q, want 2 ids", got)
	}

	if err := st.Beat(ctx, "alive", "pid=1", time.Minute); err != nil {
		t.Fatal(err)
	}
	c.LPush(ctx, ProcessingList("alive"), "x")
	if n, alive, err := st.Adopt(ctx, ProcessingList("alive"), ProcessingList("me"), HeartbeatKey("alive"), 10); err != nil || !alive || n != 0 {
		t.Errorf("Adopt of a live bridge's list = %d, alive %v, %v; want nothing moved", n, alive, err)
	}
	if err := st.StopBeating(ctx, "alive"); err != nil {
		t.Fatal(err)
	}
	if n, alive, err := st.Adopt(ctx, ProcessingList("alive"), ProcessingList("me"), HeartbeatKey("alive"), 10); err != nil || alive || n != 1 {
		t.Errorf("Adopt of a dead bridge's list = %d, alive %v, %v; want its one id", n, alive, err)
	}
	if err := st.ForgetBridge(ctx, "alive"); err != nil {
		t.Fatal(err)
	}
	if members, _ := st.BridgeIDs(ctx); slices.Contains(members, "alive") {
		t.Errorf("jetrelay:bridges = %q still lists the dead bridge with an empty list", members)
	}
}

func TestTraceOrigins_UseTheInboundFlagsOnlyWhenAdminSawAValidTraceparent(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	mustSet(t, c, DeliveryKey("valid"), `{"trace_id":"0af7651916cd43dd8448eb211c80319c","trace_flags":"00","traceparent_inbound_valid":true}`)
	mustSet(t, c, DeliveryKey("invalid"), `{"trace_id":"0af7651916cd43dd8448eb211c80319c","trace_flags":"00","traceparent_inbound_valid":false}`)
	got, err := st.TraceOrigins(ctx, []string{"valid", "invalid", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	want := []TraceOrigin{{TraceID: "0af7651916cd43dd8448eb211c80319c", Flags: "00"}, {TraceID: "0af7651916cd43dd8448eb211c80319c", Flags: "01"}, {}}
	if !slices.Equal(got, want) {
		t.Errorf("TraceOrigins = %+v, want %+v", got, want)
	}
}

// A batch moves with a fixed number of commands, leaving the lists as one
// LMOVE per id would, and never pops ids it cannot put down.
func TestMovePending_MovesABatchInOrderWithoutLosingIds(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	c.LPush(ctx, PendingList, "a", "b", "c", "d") // "a" is the oldest
	c.LPush(ctx, ProcessingList("me"), "old")
	ids, err := st.MovePending(ctx, ProcessingList("me"), 3)
	if err != nil || !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("MovePending = %q, %v; want a, b, c", ids, err)
	}
	if got := c.LRange(ctx, ProcessingList("me"), 0, -1).Val(); !slices.Equal(got, []string{"c", "b", "a", "old"}) {
		t.Errorf("processing list = %q, want c b a old (as LMOVE RIGHT LEFT one by one)", got)
	}
	if got := c.LRange(ctx, PendingList, 0, -1).Val(); !slices.Equal(got, []string{"d"}) {
		t.Errorf("pending = %q, want d", got)
	}

	c.Set(ctx, ProcessingList("broken"), "x", 0)
	if _, err := st.MovePending(ctx, ProcessingList("broken"), 3); err == nil {
		t.Error("MovePending into a key that is not a list succeeded")
	}
	if got := c.LRange(ctx, PendingList, 0, -1).Val(); !slices.Equal(got, []string{"d"}) {
		t.Errorf("pending after a failed move = %q, want d still there", got)
	}
}

func TestRemoveFromList_RemovesOneOccurrenceOfEachId(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		list, ids  []string // list head first
		wantRemain []string
	}{
		{"the batch at the head", []string{"c", "b", "a", "old"}, []string{"a", "b", "c"}, []string{"old"}},
		{"part of the batch", []string{"c", "b", "a", "old"}, []string{"a", "c"}, []string{"b", "old"}},
		{"an id twice, removed once", []string{"a", "b", "a"}, []string{"a", "b"}, []string{"a"}},
		{"ids not at the head", []string{"x", "a", "b"}, []string{"b", "a"}, []string{"x"}},
		{"an id not there", []string{"a", "b"}, []string{"a", "z"}, []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Del(ctx, "l")
			for i := len(tc.list) - 1; i >= 0; i-- {
				c.LPush(ctx, "l", tc.list[i])
			}
			if failed, err := st.RemoveFromList(ctx, "l", tc.ids); err != nil || len(failed) > 0 {
				t.Fatalf("RemoveFromList = %q, %v", failed, err)
			}
			if got := c.LRange(ctx, "l", 0, -1).Val(); !slices.Equal(got, tc.wantRemain) {
				t.Errorf("list = %q, want %q", got, tc.wantRemain)
			}
		})
	}
}
