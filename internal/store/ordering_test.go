package store

import (
	"context"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

func TestSetOrdering_KeepsTheSettingsRecordAndTheIndexTogetherAndKeepsOtherFields(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	mustSet(t, c, SettingsKey("whsub_1"), `{"standard_webhooks":true}`)
	if err := st.SetOrdering(ctx, "whsub_1", proto.OrderingStrict); err != nil {
		t.Fatal(err)
	}
	if raw := c.Get(ctx, SettingsKey("whsub_1")).Val(); raw != `{"standard_webhooks":true,"ordering":"strict"}` {
		t.Errorf("settings record %s, want the other field kept and ordering added", raw)
	}
	if got, err := st.Orderings(ctx); err != nil || got["whsub_1"] != proto.OrderingStrict {
		t.Errorf("Orderings = %v, %v; want whsub_1 strict", got, err)
	}
	// Back to the fleet default: gone from both.
	if err := st.SetOrdering(ctx, "whsub_1", ""); err != nil {
		t.Fatal(err)
	}
	if set, raw, err := st.Settings(ctx, "whsub_1"); err != nil || set.Ordering != "" {
		t.Errorf("settings record %s after removing ordering (%v), want no mode of its own", raw, err)
	}
	if got, _ := st.Orderings(ctx); len(got) != 0 {
		t.Errorf("Orderings = %v, want none", got)
	}
	if err := st.SetOrdering(ctx, "whsub_1", "sometimes"); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

func TestTakeMover_OneBridgeAtATimeAndTheNextLearnsWhoMovedLast(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	if held, last, err := st.TakeMover(ctx, "a", time.Minute); err != nil || !held || last != "" {
		t.Fatalf("first take: held=%v last=%q err=%v", held, last, err)
	}
	if held, _, err := st.TakeMover(ctx, "b", time.Minute); err != nil || held {
		t.Fatalf("b took the lease a holds: held=%v err=%v", held, err)
	}
	if held, last, _ := st.TakeMover(ctx, "a", time.Minute); !held || last != "a" {
		t.Fatalf("a's renewal: held=%v last=%q", held, last)
	}
	if err := st.DropMover(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if held, _, _ := st.TakeMover(ctx, "b", time.Minute); held {
		t.Fatal("b dropped a's lease")
	}
	if err := st.DropMover(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if held, last, _ := st.TakeMover(ctx, "b", time.Minute); !held || last != "a" {
		t.Fatalf("b after a dropped it: held=%v last=%q, want the lease and a named as the last mover", held, last)
	}
}
