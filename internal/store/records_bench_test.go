package store

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/proto"
)

// Micro-benchmarks of the per-delivery record work: every delivery parses
// its delivery and event records and applies one outcome patch.
// `go test -run '^$' -bench . ./internal/store`

var (
	benchDelivery = admin.Delivery{
		DeliveryID: "del_0123456789abcdef", SubscriptionID: "whsub_0123456789ab", EventID: "evt_0123456789abcdef0123",
		EventType: "budget.exhausted", AttemptedAt: time.Now(), TraceID: "0af7651916cd43dd8448eb211c80319c", TraceFlags: "01",
		TraceparentInboundValid: new(bool),
	}.JSON()
	benchEvent = admin.Event{
		EventID: "evt_0123456789abcdef0123", EventType: "budget.exhausted", TenantID: "tenant-a", Scope: "tenant:tenant-a/workspace:bench",
		Actor: &proto.Actor{Type: "api_key", KeyID: "key_bench"}, Source: "cycles-server", Timestamp: time.Now(),
		Data:    json.RawMessage(`{"ledger_id":"led_bench","unit":"TOKENS","allocated":10000,"remaining":0,"spent":10000,"note":"` + strings.Repeat("x", 600) + `"}`),
		TraceID: "0af7651916cd43dd8448eb211c80319c",
	}.JSON()
)

func BenchmarkParseDelivery(b *testing.B) {
	b.SetBytes(int64(len(benchDelivery)))
	for b.Loop() {
		if _, err := proto.ParseDelivery(benchDelivery); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseEvent(b *testing.B) {
	b.SetBytes(int64(len(benchEvent)))
	for b.Loop() {
		if _, err := proto.ParseEvent(benchEvent); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSuccessPatch is what RecordOutcome does to the delivery record of
// a success: apply the patch and check the result still parses.
func BenchmarkSuccessPatch(b *testing.B) {
	now := time.Now()
	p := Patch{
		{"status", proto.DeliverySuccess}, {"attempts", 1}, {"response_status", 200}, {"response_time_ms", int64(3)},
		{"completed_at", now}, {"error_message", nil}, {"next_retry_at", nil},
	}
	for b.Loop() {
		if _, err := applyChecked("delivery:x", benchDelivery, p, proto.ParseDelivery); err != nil {
			b.Fatal(err)
		}
	}
}
