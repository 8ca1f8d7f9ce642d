package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// Shape of the ordering run (issue 23): orderEvents events emitted one
// after another, each to three subscriptions (strict, first-attempt and
// none), whose receivers answer 503 to orderFailShare of the requests.
const (
	orderEvents    = 2000
	orderFailShare = 5 // one request in five
	orderKillAt    = 600
)

// orderedSub is one subscription of the ordering run.
type orderedSub struct {
	mode proto.Ordering
	id   string
	ep   *receiver.Endpoint
}

// TestOrdering_StrictAndFirstAttemptKeepOrderAcrossAnR3ClusterWithTheOwnerSIGKILLed
// runs three replicas on an R3 cluster, one subscription per mode, a
// receiver that answers 503 to a fifth of the requests, and SIGKILLs the
// replica that sends for the strict subscription mid-way. Strict: the first
// successful receipts of distinct events are in emit order; first-attempt:
// the first attempts are; none: they are not (the test can tell). Nothing
// is lost; duplicates are counted.
func TestOrdering_StrictAndFirstAttemptKeepOrderAcrossAnR3ClusterWithTheOwnerSIGKILLed(t *testing.T) {
	started := time.Now()
	b := &bed{redis: testenv.Redis(t), recv: receiver.New(), mux: http.NewServeMux()}
	b.equip(t)
	cl := testenv.Cluster(t, 3)

	// Retries as fast as admin allows, and enough of them that a fifth of
	// refusals never exhausts a delivery.
	policy := &proto.RetryPolicy{MaxRetries: ptr(10), InitialDelayMs: ptr(int64(100)), MaxDelayMs: ptr(int64(1000))}
	flaky := func(int) int {
		if rand.IntN(orderFailShare) == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	subs := []*orderedSub{{mode: proto.OrderingStrict}, {mode: proto.OrderingFirstAttempt}, {mode: proto.OrderingNone}}
	for _, s := range subs {
		path := "/ordered-" + string(s.mode)
		id, secret, err := b.writer.CreateSubscription(context.Background(), admin.Subscription{
			TenantID: "tenant-proc", URL: b.recvBase + path, EventTypes: []string{"budget.exhausted"}, RetryPolicy: policy,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.id, s.ep = id, b.recv.Handle(path, secret, flaky)
		b.mux.Handle(path, b.recv)
		if s.mode == proto.OrderingNone {
			continue
		}
		// Set as an operator does, through the binary.
		code, out := runBinary(t, map[string]string{"REDIS_URL": b.redis.Server.URL()}, 20*time.Second,
			"subscriptions", "ordering", id, string(s.mode))
		if code != 0 || !strings.Contains(out, string(s.mode)+" (own setting)") {
			t.Fatalf("subscriptions ordering %s %s: exit %d, output %q", id, s.mode, code, out)
		}
	}

	replicas := map[string]*relay{}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("replica-%d", i)
		replicas[name] = startRelay(t, map[string]string{
			"REDIS_URL":                     b.redis.Server.URL(),
			"NATS_URL":                      cl.ClientURLs(),
			"WEBHOOK_SECRET_ENCRYPTION_KEY": b.keyB64,
			"JETRELAY_BRIDGE_ID":            name,
			"JETRELAY_WORKERS":              "16",
			"JETRELAY_STREAM_REPLICAS":      "3",
			// Which replica sent a request: the one to kill.
			"JETRELAY_USER_AGENT": name,
			// Five refusals in a row happen by chance here; the breaker is
			// not what this run measures.
			"JETRELAY_BREAKER_THRESHOLD": "20",
		})
	}

	// Emitted one after another, as fast as admin writes them.
	order := make(map[string]int, orderEvents)
	var ids []string
	for i := range orderEvents {
		ev, dids, err := b.writer.Emit(context.Background(), event("budget.exhausted"), admin.TraceSnapshot{})
		if err != nil {
			t.Fatalf("emit: %v", err)
		}
		order[ev] = i
		ids = append(ids, dids...)
	}
	t.Logf("emitted %d events (%d deliveries) in %s", orderEvents, len(ids), time.Since(started).Round(time.Millisecond))

	strict := subs[0].ep
	awaitCondition(t, "the strict subscription's receipts reach the kill point", 60*time.Second,
		func() bool { return strict.Stats().Unique >= orderKillAt })
	log := strict.Deliveries()
	owner := log[len(log)-1].Header.Get("User-Agent")
	mover := b.redis.Client.Get(context.Background(), store.MoverLease).Val()
	replicas[owner].kill(t)
	killed := time.Now()
	t.Logf("SIGKILLed %s, the strict line's owner (bridge mover: %s), at %d strict receipts, %s into the run",
		owner, mover, len(log), killed.Sub(started).Round(time.Millisecond))

	b.awaitSuccess(t, ids, 120*time.Second)
	t.Logf("every delivery SUCCESS %s after the kill, %s into the run", time.Since(killed).Round(time.Millisecond), time.Since(started).Round(time.Millisecond))

	for _, s := range subs {
		all := s.ep.Deliveries()
		first := inversions(all, order, func(d receiver.Delivery) bool { return true })
		firstOK := inversions(all, order, func(d receiver.Delivery) bool { return d.Status/100 == 2 })
		st := s.ep.Stats()
		t.Logf("%-13s requests %d, distinct events accepted %d, duplicates %d; adjacent inversions: first attempts %d (largest step back %d), first successes %d (largest step back %d)",
			s.mode, st.Requests, st.Unique, st.Duplicates, first.count, first.worst, firstOK.count, firstOK.worst)
		if st.Unique != orderEvents {
			t.Errorf("%s: %d distinct events accepted, want every one of %d", s.mode, st.Unique, orderEvents)
		}
		// At most one send in flight per replica on a line; a retry that
		// left a first-attempt line may be in flight too.
		if s.mode != proto.OrderingNone && st.Duplicates > 16 {
			t.Errorf("%s: %d duplicates, want only those around the kill", s.mode, st.Duplicates)
		}
		switch s.mode {
		case proto.OrderingStrict:
			if firstOK.count != 0 {
				t.Errorf("strict: %d inversions of first successful receipts, want 0 (first at %s)", firstOK.count, firstOK.at)
			}
		case proto.OrderingFirstAttempt:
			if first.count != 0 {
				t.Errorf("first-attempt: %d inversions of first attempts, want 0 (first at %s)", first.count, first.at)
			}
		case proto.OrderingNone:
			if first.count == 0 {
				t.Errorf("none: the first attempts arrived in emit order; the run cannot tell ordered from unordered")
			}
		}
	}
	// The strict line moved on soon after its owner died.
	gap, at := largestGap(strict.Deliveries(), killed)
	t.Logf("strict: largest pause between requests after the kill %s (at %s)", gap.Round(time.Millisecond), at.Format("15:04:05.000"))
	if gap > 15*time.Second {
		t.Errorf("strict: the line stood still %s after its owner was killed, want seconds", gap)
	}
}

// inversion counts adjacent steps back in emit order among the first
// request per event that keep accepts.
type inversion struct {
	count, worst int
	at           string
}

func inversions(log []receiver.Delivery, order map[string]int, keep func(receiver.Delivery) bool) inversion {
	var inv inversion
	seen := map[string]bool{}
	last := -1
	for _, d := range log {
		if seen[d.EventID] || !keep(d) {
			continue
		}
		seen[d.EventID] = true
		i := order[d.EventID]
		if i < last {
			inv.count++
			if inv.at == "" {
				inv.at = fmt.Sprintf("event #%d after #%d", i, last)
			}
			inv.worst = max(inv.worst, last-i)
		}
		last = i
	}
	return inv
}

// largestGap is the longest time between two requests of log after since.
func largestGap(log []receiver.Delivery, since time.Time) (time.Duration, time.Time) {
	var gap time.Duration
	var at time.Time
	prev := since
	for _, d := range log {
		if d.At.Before(since) {
			continue
		}
		if g := d.At.Sub(prev); g > gap {
			gap, at = g, prev
		}
		prev = d.At
	}
	return gap, at
}
