package ops_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

func TestQuarantine_ListsEntriesAndRequeuesOnlyRepairedOnesOnce(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	st := store.New(e.redis.Client)
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	repaired := e.delivery(t, sub, proto.DeliveryPending, time.Now())
	if err := st.Quarantine(ctx, repaired, "corrupt_record", []byte(`{"status":"LOST"}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.redis.Client.Set(ctx, store.DeliveryKey("del_broken"), `{"status":`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := st.Quarantine(ctx, "del_broken", "corrupt_record", []byte(`{"status":`)); err != nil {
		t.Fatal(err)
	}

	out, _, err := e.cli(t, nil, "quarantine", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"del_broken", repaired, "corrupt_record", `{"status":"LOST"}`, "2 of 2 entries"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}

	if _, _, err := e.cli(t, nil, "quarantine", "requeue", repaired, "del_nope"); !errors.Is(err, ops.ErrUnknownDeliveries) {
		t.Fatalf("unknown id: err = %v", err)
	}
	if n, _ := e.redis.Client.LLen(ctx, store.PendingList).Result(); n != 0 {
		t.Fatalf("a refused requeue pushed %d ids", n)
	}
	for run := range 2 {
		out, _, err = e.cli(t, nil, "quarantine", "requeue", "--all")
		if err != nil {
			t.Fatal(err)
		}
		if run == 0 && (!strings.Contains(out, "requeued "+repaired) || !strings.Contains(out, "skipped del_broken: record still unreadable")) {
			t.Fatalf("run %d:\n%s", run, out)
		}
	}
	ids, _ := e.redis.Client.LRange(ctx, store.PendingList, 0, -1).Result()
	if len(ids) != 1 || ids[0] != repaired {
		t.Fatalf("dispatch:pending = %v; want the repaired delivery once", ids)
	}
	page, err := e.tool.QuarantineList(ctx, 0, 10)
	if err != nil || page.Total != 1 || page.Entries[0].DeliveryID != "del_broken" {
		t.Fatalf("left in quarantine: %+v %v", page, err)
	}
}
