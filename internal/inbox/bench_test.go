package inbox_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/inbox"
	"github.com/jetrelay/jetrelay/proto"
)

// benchClients is how many senders post to the intake at once, like a
// jetrelay engine's worker pool.
const benchClients = 32

// BenchmarkInbox measures the two halves of the inbox against a private
// PostgreSQL: intake (verify + committed INSERT, events/s and p99 latency
// seen by the sender) and forwarding (claim + forward + record, events/s to
// a local HTTP target). Run it with `go tool task bench:inbox`.
func BenchmarkInbox(b *testing.B) {
	b.Run("intake", func(b *testing.B) {
		pg := database(b)
		s := startInbox(b, inbox.Config{Listen: "127.0.0.1:0", PostgresURL: pg.URL, Secrets: []string{secret}, Workers: -1})
		body := []byte(`{"event_id":"evt","event_type":"budget.exhausted","data":{"ledger_id":"led_1","remaining":0}}`)
		sig := proto.Sign(secret, body)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients}}
		latencies := make([]time.Duration, b.N)
		var next atomic.Int64
		run := fmt.Sprintf("%d-", time.Now().UnixNano())
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for range benchClients {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < b.N; i = int(next.Add(1) - 1) {
					req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr()+"/", strings.NewReader(string(body)))
					req.Header.Set(proto.HeaderEventID, run+fmt.Sprint(i))
					req.Header.Set(proto.HeaderSignature, sig)
					t0 := time.Now()
					resp, err := client.Do(req)
					if err != nil || resp.StatusCode != http.StatusAccepted {
						b.Errorf("intake: %v %v", err, resp)
						return
					}
					resp.Body.Close()
					latencies[i] = time.Since(t0)
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		slices.Sort(latencies)
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	})
	b.Run("forward", func(b *testing.B) {
		pg := database(b)
		if err := inbox.Migrate(context.Background(), pg.Pool); err != nil {
			b.Fatal(err)
		}
		var forwarded atomic.Int64
		target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { forwarded.Add(1) }))
		defer target.Close()
		store := inbox.NewStore(pg.Pool)
		h := http.Header{proto.HeaderEventType: {"budget.exhausted"}}
		for i := range b.N {
			if _, err := store.Insert(context.Background(), fmt.Sprintf("evt-fwd-%d-%d", b.N, i), "budget.exhausted", h, []byte(`{}`)); err != nil {
				b.Fatal(err)
			}
		}
		b.ResetTimer()
		start := time.Now()
		startInbox(b, inbox.Config{PostgresURL: pg.URL, Forward: target.URL, PollInterval: 10 * time.Millisecond})
		for {
			counts, err := store.Counts(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if counts[inbox.StatusDone] == int64(b.N) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	})
}
