package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/testenv"
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

// BenchmarkReadForAttempt is the engine's read of a delivery and what its
// attempt needs, without the autopipeliner (one round trip per call), from
// 16 goroutines against a local redis-server: the delivery, then Load (two
// round trips one after the other), or DeliveryAndLoad with the ids a work
// item's headers name (one). Its ns/op include the wait for Redis; the CPU
// of this process and of redis-server per op (cpu-µs/op, redis-µs/op) are
// what a delivery pays; compare the two on the same machine, in one run.
// `go test -run '^$' -bench ReadForAttempt -benchmem ./internal/store`
func BenchmarkReadForAttempt(b *testing.B) {
	env := testenv.Redis(b)
	st := NewWithOptions(env.Client, Options{})
	ctx := context.Background()
	for key, v := range map[string]string{DeliveryKey(delID): pendingDelivery, EventKey(evtID): string(benchEvent),
		SubscriptionKey(subID): adminSub, SecretKey(subID): "enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd5kdFcPheIhlCI483dCw="} {
		if err := env.Client.Set(ctx, key, v, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("GET then MGET", func(b *testing.B) {
		defer reportCPU(b, env.Client)()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				rec, err := st.Delivery(ctx, delID)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := st.Load(ctx, rec.Delivery); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("one MGET", func(b *testing.B) {
		defer reportCPU(b, env.Client)()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, pre, err := st.DeliveryAndLoad(ctx, delID, evtID, subID)
				if err != nil || pre == nil {
					b.Fatal(err)
				}
				if _, err := pre.Bundle(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// reportCPU returns a function that reports this process's and
// redis-server's CPU per op since reportCPU was called.
func reportCPU(b *testing.B, rdb *redis.Client) func() {
	c0, r0 := processCPU(), redisCPU(b, rdb)
	return func() {
		c1, r1 := processCPU(), redisCPU(b, rdb)
		b.ReportMetric(float64((c1-c0).Microseconds())/float64(b.N), "cpu-µs/op")
		b.ReportMetric(float64((r1-r0).Microseconds())/float64(b.N), "redis-µs/op")
	}
}

// redisCPU is redis-server's user + system CPU (INFO cpu).
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\r\n") {
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
