package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// waitNoted is the engine's wait note: why a delivery waits, unless it is
// already final.
func waitNoted(d *proto.Delivery) Patch {
	if d.Status.Terminal() {
		return nil
	}
	return Patch{{Name: "jetrelay_waiting", Value: "breaker_open"}}
}

func TestPatchDeliveries_EachRecordLandsOnItsOwnWhateverHappenedToTheOthers(t *testing.T) {
	env := testenv.Redis(t)
	ctx := context.Background()
	st := New(env.Client)
	id := func(i int) string { return fmt.Sprintf("del_batch%02d", i) }
	const n = 6
	recs := make([]*DeliveryRecord, n)
	for i := range n {
		raw := strings.Replace(pendingDelivery, delID, id(i), 1)
		env.Client.Set(ctx, DeliveryKey(id(i)), raw, 1209600*time.Second)
		rec, err := st.Delivery(ctx, id(i))
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = rec
	}
	// After the reads: admin records an answer on 1 (the note must still
	// land, admin's change kept), 2 vanishes, 3 became final (nothing to
	// write), and 4's patch cannot be applied.
	answered := strings.TrimSuffix(strings.Replace(pendingDelivery, delID, id(1), 1), "}") + `,"response_status_code":503}`
	env.Client.Set(ctx, DeliveryKey(id(1)), answered, redis.KeepTTL)
	env.Client.Del(ctx, DeliveryKey(id(2)))
	final := strings.Replace(strings.Replace(pendingDelivery, delID, id(3), 1), `"PENDING"`, `"SUCCESS"`, 1)
	env.Client.Set(ctx, DeliveryKey(id(3)), final, redis.KeepTTL)
	recs[3].Delivery.Status = proto.DeliverySuccess
	items := make([]DeliveryPatch, n)
	for i := range n {
		items[i] = DeliveryPatch{Rec: recs[i], Patch: waitNoted}
	}
	items[4].Patch = func(*proto.Delivery) Patch { return Patch{{Name: "attempts", Value: "not a number"}} }

	errs := st.PatchDeliveries(ctx, items)

	for _, i := range []int{0, 1, 5} {
		if errs[i] != nil {
			t.Errorf("delivery %d: %v", i, errs[i])
		}
		raw, _ := env.Client.Get(ctx, DeliveryKey(id(i))).Result()
		if !strings.Contains(raw, `"jetrelay_waiting":"breaker_open"`) {
			t.Errorf("delivery %d not noted: %s", i, raw)
		}
		if ttl, _ := env.Client.TTL(ctx, DeliveryKey(id(i))).Result(); ttl < 1209590*time.Second {
			t.Errorf("delivery %d: TTL %s not kept", i, ttl)
		}
	}
	if raw, _ := env.Client.Get(ctx, DeliveryKey(id(1))).Result(); !strings.Contains(raw, `"response_status_code":503`) {
		t.Errorf("admin's write lost: %s", raw)
	}
	if !errors.Is(errs[2], ErrNotFound) {
		t.Errorf("vanished delivery: err = %v, want ErrNotFound", errs[2])
	}
	if n, _ := env.Client.Exists(ctx, DeliveryKey(id(2))).Result(); n != 0 {
		t.Error("vanished delivery recreated")
	}
	if errs[3] != nil {
		t.Errorf("final delivery: %v", errs[3])
	}
	if raw, _ := env.Client.Get(ctx, DeliveryKey(id(3))).Result(); raw != final {
		t.Errorf("final delivery rewritten: %s", raw)
	}
	if errs[4] == nil {
		t.Error("a patch that leaves the record unreadable was accepted")
	}
	if raw, _ := env.Client.Get(ctx, DeliveryKey(id(4))).Result(); strings.Contains(raw, "not a number") {
		t.Errorf("unreadable patch written: %s", raw)
	}
}

func TestPatchDeliveries_NothingToWriteCostsNoRoundTrip(t *testing.T) {
	env := testenv.Redis(t)
	ctx := context.Background()
	st := New(env.Client)
	env.Client.Set(ctx, DeliveryKey(delID), pendingDelivery, 0)
	rec, err := st.Delivery(ctx, delID)
	if err != nil {
		t.Fatal(err)
	}
	env.Client.Del(ctx, DeliveryKey(delID)) // a round trip would report it gone
	errs := st.PatchDeliveries(ctx, []DeliveryPatch{{Rec: rec, Patch: func(*proto.Delivery) Patch { return nil }}})
	if errs[0] != nil {
		t.Fatalf("empty patch: %v", errs[0])
	}
}
