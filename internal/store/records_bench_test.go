package store

import (
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// Micro-benchmarks of the per-delivery record work: every delivery parses
// its delivery and event records and applies one outcome patch.
// `go test -run '^$' -bench . ./internal/store`

// The records as admin writes them (internal/admin cannot be used here: it
// saves events with this package's SaveEventLua).
var (
	benchDelivery = []byte(`{"delivery_id":"del_0123456789abcdef","subscription_id":"whsub_0123456789ab","event_id":"evt_0123456789abcdef0123",` +
		`"event_type":"budget.exhausted","status":"PENDING","attempted_at":"2026-11-24T06:32:35.130585987Z","attempts":0,` +
		`"trace_id":"0af7651916cd43dd8448eb211c80319c","trace_flags":"01","traceparent_inbound_valid":false}`)
	benchEvent = []byte(`{"event_id":"evt_0123456789abcdef0123","event_type":"budget.exhausted","category":null,` +
		`"timestamp":"2026-11-24T06:32:35.130595382Z","tenant_id":"tenant-a","scope":"tenant:tenant-a/workspace:bench",` +
		`"actor":{"type":"api_key","key_id":"key_bench"},"source":"cycles-server","data":{"ledger_id":"led_bench","unit":"TOKENS",` +
		`"allocated":10000,"remaining":0,"spent":10000,"note":"` + strings.Repeat("x", 600) + `"},"trace_id":"0af7651916cd43dd8448eb211c80319c"}`)
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
