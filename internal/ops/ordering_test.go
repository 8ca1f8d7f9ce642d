package ops_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

func TestInspectAndStatus_ShowTheOrderingAndADeliverysPlaceOnItsLine(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	if _, err := queue.EnsureStream(ctx, e.js, e.qc); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	sub := e.subscription(t, "acme", "https://hooks.example.com/ordered")
	if err := store.New(e.redis.Client).SetOrdering(ctx, sub, proto.OrderingStrict); err != nil {
		t.Fatal(err)
	}
	var line []string
	for range 3 {
		id := e.delivery(t, sub, proto.DeliveryPending, now.Add(-time.Minute))
		if _, err := e.js.PublishMsg(ctx, queue.NewMsg(e.qc.OrderedSubject(sub), id)); err != nil {
			t.Fatal(err)
		}
		line = append(line, id)
	}
	requeued := e.delivery(t, sub, proto.DeliveryPending, now.Add(-time.Minute))
	e.redis.Client.LPush(ctx, store.PendingList, requeued)

	in, err := e.tool.Inspect(ctx, line[2], nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.Ordering == nil || in.Ordering.Mode != proto.OrderingStrict || in.Ordering.Source != "subscription" {
		t.Errorf("ordering %+v, want strict from the subscription's own setting", in.Ordering)
	}
	if in.Where.State != "ordered_line" || !strings.Contains(in.Where.Detail, "place 3 ") {
		t.Errorf("where %+v, want place 3 on its ordered line", in.Where)
	}
	in, err = e.tool.Inspect(ctx, requeued, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(in.Next, "joins the end of its line") {
		t.Errorf("next %q does not say a requeued delivery joins the end of the line", in.Next)
	}

	rep, err := e.tool.Status(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Ordering; o == nil || o.FleetDefault != proto.OrderingNone || o.Subscriptions[sub] != proto.OrderingStrict || o.Lines[sub] != 3 {
		t.Errorf("status ordering %+v, want fleet default none, %s strict with 3 on its line", o, sub)
	}
}
