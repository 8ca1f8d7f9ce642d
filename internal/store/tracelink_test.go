package store

import (
	"context"
	"testing"
	"time"
)

const attemptTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTraceLink_RemembersTheLastAttemptUntilItExpiresOrIsForgotten(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	if tp, err := st.LastAttempt(ctx, delID); err != nil || tp != "" {
		t.Fatalf("LastAttempt before any = %q, %v; want none", tp, err)
	}
	if err := st.RememberAttempt(ctx, delID, "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01", 25*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := st.RememberAttempt(ctx, delID, attemptTraceparent, 25*time.Hour); err != nil {
		t.Fatal(err)
	}
	if tp, err := st.LastAttempt(ctx, delID); err != nil || tp != attemptTraceparent {
		t.Errorf("LastAttempt = %q, %v; want the latest %q", tp, err, attemptTraceparent)
	}
	if got := mustGet(t, c, "jetrelay:trace:"+delID); got != attemptTraceparent {
		t.Errorf("jetrelay:trace:%s = %q", delID, got)
	}
	if ttl := ttlSeconds(t, c, TraceLinkKey(delID)); ttl <= 24*3600 || ttl > 25*3600 {
		t.Errorf("TTL = %ds, want just under 25h", ttl)
	}
	if err := st.ForgetAttempt(ctx, delID); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, TraceLinkKey(delID)).Val(); n != 0 {
		t.Errorf("key still there after ForgetAttempt")
	}
}

func TestTraceLink_TheRetentionPassLeavesTheKeysAlone(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	if err := st.RememberAttempt(ctx, delID, attemptTraceparent, time.Hour); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.TrimIndexes(ctx, now, now); err != nil {
		t.Fatalf("TrimIndexes with a trace link key present: %v", err)
	}
	if tp, err := st.LastAttempt(ctx, delID); err != nil || tp != attemptTraceparent {
		t.Errorf("after a retention pass LastAttempt = %q, %v", tp, err)
	}
}
