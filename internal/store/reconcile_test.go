package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/proto"
)

const stuckJSON = `{"delivery_id":"del_1","subscription_id":"whsub_1","event_id":"evt_1","event_type":"budget.exhausted","status":"RETRYING","attempted_at":"2026-01-01T00:00:00Z","attempts":1,"next_retry_at":"2026-01-01T00:00:01Z","jetrelay_waiting":"retry"}`

func TestPutBackAndFailExpired_ActOnlyOnTheRecordTheyJudged(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	if err := c.Set(ctx, DeliveryKey("del_1"), stuckJSON, 0).Err(); err != nil {
		t.Fatal(err)
	}
	judged, err := st.Delivery(ctx, "del_1")
	if err != nil {
		t.Fatal(err)
	}
	// An engine writes the record after the reconciler judged it.
	if _, err := st.UpdateDelivery(ctx, "del_1", func(*proto.Delivery) (Patch, error) {
		return Patch{{"attempts", 2}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.PutBack(ctx, judged); err != nil || ok {
		t.Fatalf("PutBack of a changed record = %v, %v; want a no-op", ok, err)
	}
	if ok, err := st.FailExpired(ctx, judged, "Delivery expired: 48h old (max 24h)", time.Now()); err != nil || ok {
		t.Fatalf("FailExpired of a changed record = %v, %v; want a no-op", ok, err)
	}
	if n := c.LLen(ctx, PendingList).Val(); n != 0 {
		t.Fatalf("%s holds %d ids after no-ops", PendingList, n)
	}

	current, _ := st.Delivery(ctx, "del_1")
	for range 2 {
		if _, err := st.PutBack(ctx, current); err != nil {
			t.Fatal(err)
		}
	}
	if ids := c.LRange(ctx, PendingList, 0, -1).Val(); len(ids) != 1 || ids[0] != "del_1" {
		t.Fatalf("%s = %v after two put-backs; want del_1 once", PendingList, ids)
	}
	if ok, err := st.FailExpired(ctx, current, "Delivery expired: 48h old (max 24h)", time.Now()); err != nil || !ok {
		t.Fatalf("FailExpired = %v, %v", ok, err)
	}
	rec, _ := st.Delivery(ctx, "del_1")
	if rec.Status != proto.DeliveryFailed || *rec.ErrorMessage != "Delivery expired: 48h old (max 24h)" || rec.NextRetryAt != nil || rec.Waiting != nil || rec.CompletedAt == nil {
		t.Fatalf("failed record: %s", rec.Raw)
	}
}

func TestIndexPage_ResumesAmongEqualScores(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	for _, id := range []string{"d", "a", "c", "b", "e"} {
		c.ZAdd(ctx, DeliveryIndexKey("whsub_1"), redis.Z{Score: 1000, Member: id})
	}
	c.ZAdd(ctx, DeliveryIndexKey("whsub_1"), redis.Z{Score: 5000, Member: "late"})
	var got []string
	var pos IndexPos
	for {
		page, err := st.IndexPage(ctx, "whsub_1", pos, 4000, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			got = append(got, e.ID)
		}
		last := page[len(page)-1]
		pos = IndexPos{Score: last.AttemptedAtMs, Member: last.ID}
	}
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("pages read %v, want %v (each once, nothing past the max score)", got, want)
	}
}
