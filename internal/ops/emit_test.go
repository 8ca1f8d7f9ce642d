package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

func TestEmit_WritesTheEventAndQueuesADeliveryForEachMatchingSubscriptionAsAdmin(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	budget := e.subscription(t, "acme", "https://hooks.example.com/budget")
	other, _, err := e.admin.CreateSubscription(ctx, admin.Subscription{TenantID: "acme", URL: "https://hooks.example.com/t", EventTypes: []string{"tenant.created"}})
	if err != nil {
		t.Fatal(err)
	}
	scoped, _, err := e.admin.CreateSubscription(ctx, admin.Subscription{TenantID: "acme", URL: "https://hooks.example.com/s", EventCategories: []string{"budget"}, ScopeFilter: "tenant:acme/*"})
	if err != nil {
		t.Fatal(err)
	}

	out, _, err := e.cli(t, nil, "events", "emit", "--tenant", "acme", "--type", "budget.exhausted", "--scope", "tenant:acme/ws:prod",
		"--data", `{"budget_id":"b1","remaining":0}`, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res ops.EmitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string]bool{admin.DeliveryID(res.EventID, budget): true, admin.DeliveryID(res.EventID, scoped): true}
	if len(res.DeliveryIDs) != 2 || !want[res.DeliveryIDs[0]] || !want[res.DeliveryIDs[1]] {
		t.Fatalf("deliveries %v; want one each for %s and %s, none for %s", res.DeliveryIDs, budget, scoped, other)
	}
	raw, err := e.redis.Client.Get(ctx, store.EventKey(res.EventID)).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := proto.ParseEvent(raw)
	if err != nil || ev.TenantID != "acme" || ev.Category != "budget" || string(ev.Data) != `{"budget_id":"b1","remaining":0}` {
		t.Fatalf("event record %s: %v", raw, err)
	}
	pending, _ := e.redis.Client.LRange(ctx, store.PendingList, 0, -1).Result()
	if len(pending) != 2 {
		t.Fatalf("dispatch:pending = %v", pending)
	}
	if !proto.ValidTraceID(res.TraceID) || ev.TraceID != res.TraceID {
		t.Fatalf("trace id %q, event's %q: want one minted and stored", res.TraceID, ev.TraceID)
	}
	for _, id := range res.DeliveryIDs {
		rec, err := store.New(e.redis.Client).Delivery(ctx, id)
		if err != nil || rec.TraceID != res.TraceID || rec.TraceFlags != "01" {
			t.Fatalf("delivery %s does not carry the trace: %+v %v", id, rec, err)
		}
	}
	if n, _ := e.redis.Client.ZCard(ctx, "events:acme").Result(); n != 1 {
		t.Fatalf("events:acme has %d members; want the event indexed as admin indexes it", n)
	}
}

func TestEmit_ExplainsWhenNoSubscriptionMatchesAndRefusesBadInput(t *testing.T) {
	e := newOpsEnv(t)
	out, _, err := e.cli(t, nil, "events", "emit", "--tenant", "acme", "--type", "budget.exhausted")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "no deliveries: no ACTIVE subscription of tenant acme") {
		t.Fatalf("no hint:\n%s", out)
	}
	for _, args := range [][]string{
		{"--type", "budget.exhausted"},
		{"--tenant", "acme"},
		{"--tenant", "acme", "--type", "budget.exhausted", "--data", "{not json"},
		{"--tenant", "acme", "--type", "budget.exhausted", "--trace-id", "xyz"},
	} {
		_, _, err := e.cli(t, nil, append([]string{"events", "emit"}, args...)...)
		if !errors.Is(err, ops.ErrBadArgument) || strings.Contains(err.Error(), "filter") {
			t.Errorf("%v: err = %v, want a clear refusal naming a bad argument", args, err)
		}
	}
	// Only the first, valid emit stored an event.
	if n, _ := e.redis.Client.ZCard(context.Background(), "events:_all").Result(); n != 1 {
		t.Fatalf("events:_all has %d events; the refused emits must write nothing", n)
	}
}

func TestEmit_WarnsAboutWhatTheReferenceValidatorWouldFlag(t *testing.T) {
	e := newOpsEnv(t)
	// An unknown type and a budget event without its ledger: emitted (the
	// engine delivers them, as the reference does), but said out loud.
	_, stderr, err := e.cli(t, nil, "events", "emit", "--tenant", "acme", "--type", "no.such.type")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, `warning: "no.such.type" is not a Cycles event type`) {
		t.Errorf("no warning for an unknown type; stderr:\n%s", stderr)
	}
	_, stderr, err = e.cli(t, nil, "events", "emit", "--tenant", "acme", "--type", "budget.exhausted", "--data", `{"budget_id":"b_1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "warning: budget events carry data.ledger_id") {
		t.Errorf("no warning for a budget event without ledger_id; stderr:\n%s", stderr)
	}
	// The README's example is valid: nothing to warn about.
	_, stderr, err = e.cli(t, nil, "events", "emit", "--tenant", "acme", "--type", "budget.exhausted", "--data", `{"ledger_id":"led_1","budget_id":"b_1","remaining":0}`)
	if err != nil || strings.Contains(stderr, "warning") {
		t.Errorf("a valid event warned or failed: %v\n%s", err, stderr)
	}
}
