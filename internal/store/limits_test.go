package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// padded returns a valid JSON object of record with filler making it size
// bytes long.
func padded(record string, size int) string {
	filler := size - len(record) - len(`,"pad":""`)
	return strings.TrimSuffix(record, "}") + `,"pad":"` + strings.Repeat("x", filler) + `"}`
}

func TestRecordsOverTheirSizeBoundAreCorruptAndNamedWithTheirSize(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	delivery := `{"delivery_id":"` + delID + `","subscription_id":"` + subID + `","event_id":"` + evtID + `","status":"PENDING"}`

	// At the bound: read as usual.
	mustSet(t, c, DeliveryKey(delID), padded(delivery, MaxDeliveryRecord))
	mustSet(t, c, EventKey(evtID), padded(storedEvent, MaxEventRecord))
	mustSet(t, c, SubscriptionKey(subID), padded(adminSub, MaxSubscriptionRecord))
	if _, err := st.Delivery(ctx, delID); err != nil {
		t.Errorf("delivery of exactly %d bytes: %v", MaxDeliveryRecord, err)
	}
	b, err := st.Load(ctx, loadDelivery)
	if err != nil || b.EventErr != nil || b.SubscriptionErr != nil {
		t.Fatalf("records at their bound: %v, event %v, subscription %v", err, b.EventErr, b.SubscriptionErr)
	}

	// One byte over: corrupt, with the size in the message and never the value.
	mustSet(t, c, DeliveryKey(delID), padded(delivery, MaxDeliveryRecord+1))
	mustSet(t, c, EventKey(evtID), padded(storedEvent, MaxEventRecord+1))
	mustSet(t, c, SubscriptionKey(subID), padded(adminSub, MaxSubscriptionRecord+1))
	_, err = st.Delivery(ctx, delID)
	var ce *CorruptError
	if !errors.As(err, &ce) || len(ce.Raw) != MaxDeliveryRecord+1 {
		t.Errorf("oversized delivery: %v, want a CorruptError keeping the value for quarantine", err)
	}
	b, err = st.Load(ctx, loadDelivery)
	if err != nil {
		t.Fatalf("Load: %v (an oversized record is not an infrastructure failure)", err)
	}
	for name, err := range map[string]error{"delivery": ce, "event": b.EventErr, "subscription": b.SubscriptionErr} {
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bytes, more than the") || strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%s: %v, want a corrupt-record error naming the size, not the value", name, err)
		}
	}
	if b.Event != nil || b.Subscription != nil {
		t.Error("oversized records were parsed")
	}
}
