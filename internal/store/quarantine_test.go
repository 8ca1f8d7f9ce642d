package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestQuarantine_EntryIsReadableJSONWithTheRawRecord(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	before := time.Now().UnixMilli()
	if err := st.Quarantine(ctx, "del_1", "first", []byte("older")); err != nil {
		t.Fatal(err)
	}
	raw := []byte("{\"delivery_id\":\"del_2\",\"status\":\"BOGUS\"}\n\x00\xff")
	if err := st.Quarantine(ctx, "del_2", "unknown status", raw); err != nil {
		t.Fatalf("Quarantine: %v", err)
	}

	entries := c.LRange(ctx, FailedList, 0, -1).Val()
	if len(entries) != 2 {
		t.Fatalf("%s holds %d entries, want 2", FailedList, len(entries))
	}
	var e struct {
		DeliveryID      string `json:"delivery_id"`
		Reason          string `json:"reason"`
		QuarantinedAtMs int64  `json:"quarantined_at_ms"`
		Payload         string `json:"payload"`
	}
	if err := json.Unmarshal([]byte(entries[0]), &e); err != nil {
		t.Fatalf("newest entry is not JSON: %v\n%s", err, entries[0])
	}
	if e.DeliveryID != "del_2" || e.Reason != "unknown status" || e.QuarantinedAtMs < before {
		t.Errorf("entry = %+v", e)
	}
	if want := "{\"delivery_id\":\"del_2\",\"status\":\"BOGUS\"}\n\x00\uFFFD"; e.Payload != want {
		t.Errorf("payload = %q, want %q", e.Payload, want)
	}
}

func TestQuarantine_ListStaysBoundedAndPayloadIsCut(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	old := make([]any, maxQuarantined)
	for i := range old {
		old[i] = "old"
	}
	c.RPush(ctx, FailedList, old...)

	if err := st.Quarantine(ctx, "del_big", "huge record", []byte(strings.Repeat("é", 40000))); err != nil {
		t.Fatalf("Quarantine: %v", err)
	}
	if n := c.LLen(ctx, FailedList).Val(); n != maxQuarantined {
		t.Fatalf("list length = %d, want %d", n, maxQuarantined)
	}
	var e struct {
		DeliveryID       string `json:"delivery_id"`
		Payload          string `json:"payload"`
		PayloadTruncated bool   `json:"payload_truncated"`
	}
	if err := json.Unmarshal([]byte(c.LIndex(ctx, FailedList, 0).Val()), &e); err != nil {
		t.Fatal(err)
	}
	if e.DeliveryID != "del_big" || !e.PayloadTruncated || len(e.Payload) != maxQuarantinePayload {
		t.Errorf("newest entry: id %s, truncated %v, payload %d bytes; want del_big cut to %d", e.DeliveryID, e.PayloadTruncated, len(e.Payload), maxQuarantinePayload)
	}
}
