package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// The rollback after a crash, as an operator meets it: jetrelay on its
// embedded server is killed mid-load with sends in flight, short retries
// released with a delay and wake-ups (retries, breaker put-offs) waiting in
// JetStream, some of them falling due while it is down. handback must work
// once the heartbeats expire, and leave every delivery either terminal or
// where the reference reads it, and nothing in the stream.
func TestHandback_AfterJetrelayWasKilledMidLoadWorksWithinSecondsAndLosesNothing(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	ctx := context.Background()
	dataDir := t.TempDir()
	env := b.env("JETRELAY_DATA_DIR", dataDir, "JETRELAY_ACK_WAIT", "2s", "JETRELAY_WORKERS", "16")
	delete(env, "NATS_URL")

	// Never auto-disabled within the test: its deliveries keep waiting.
	_, secret, err := b.writer.CreateSubscription(ctx, admin.Subscription{
		TenantID: "tenant-proc", URL: b.recvBase + "/down", EventTypes: []string{"budget.funded"}, DisableAfterFailures: 100000,
		RetryPolicy: &proto.RetryPolicy{MaxRetries: ptr(6), InitialDelayMs: ptr(int64(500)), BackoffMultiplier: ptr(2.0), MaxDelayMs: ptr(int64(4000))},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.recv.Handle("/down", secret, receiver.Always(http.StatusServiceUnavailable))
	b.mux.Handle("/down", b.recv)
	h := newHold()
	b.endpoint(t, "/held", "budget.exhausted", h.wrap)
	t.Cleanup(h.open)

	r := startRelay(t, env)
	all := b.emit(t, "budget.exhausted", 6)
	down := b.emit(t, "budget.funded", 300)
	all = append(all, down...)
	h.awaitHeld(t, 2, 30*time.Second)
	awaitCondition(t, "every delivery taken in, retries and put-offs waiting in JetStream", 60*time.Second, func() bool {
		if n, err := b.redis.Client.LLen(ctx, store.PendingList).Result(); err != nil || n > 0 {
			return false
		}
		counts := map[proto.DeliveryStatus]int{}
		for _, st := range b.statuses(down) {
			counts[st]++
		}
		// The breaker opens after a few failures and puts off the rest.
		return counts[proto.DeliveryRetrying] >= 3
	})
	r.kill(t)
	killed := time.Now()

	// It refuses while the killed process's heartbeats last, then works.
	refusals := 0
	for {
		code, out := runBinary(t, env, time.Minute, "handback")
		if code == 0 {
			t.Logf("handback %s after the kill, after %d refusals: %s", time.Since(killed).Round(100*time.Millisecond), refusals, strings.TrimSpace(out))
			break
		}
		if !strings.Contains(out, "still running") || !strings.Contains(out, "heartbeat lasts until") {
			t.Fatalf("handback exited %d:\n%s\nwant a refusal naming what runs, or success", code, out)
		}
		refusals++
		if time.Since(killed) > 15*time.Second {
			t.Fatalf("handback still refuses %s after the kill (heartbeats last 5s):\n%s", time.Since(killed).Round(100*time.Millisecond), out)
		}
		time.Sleep(250 * time.Millisecond)
	}

	var lost []string
	for id, st := range b.statuses(all) {
		if !st.Terminal() && b.inReferenceKeys(t, id) == "" {
			lost = append(lost, id+"="+string(st))
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d deliveries are neither terminal nor in dispatch:pending / dispatch:retry, e.g. %v", len(lost), len(all), lost[:min(5, len(lost))])
	}
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, "JETRELAY_DISPATCH")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("dispatch stream after handback: %+v, %v; want empty", info.State, err)
	}
}
