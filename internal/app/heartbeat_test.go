package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/handback"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// A running engine says so in Redis, so `jetrelay handback` refuses to hand
// its work away; once it stopped cleanly it no longer counts as running.
func TestRun_EngineKeepsAHeartbeatWhileItRunsAndRemovesItWhenItStops(t *testing.T) {
	re := testenv.Redis(t)
	ctx := context.Background()
	ns, err := natsserver.Start(ctx, natsserver.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	env := map[string]string{"REDIS_URL": re.Server.URL(), "NATS_URL": ns.ClientURL(), "JETRELAY_ROLE": "engine", "JETRELAY_WORKERS": "2"}
	cfg, err := config.Load("jetrelay", nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	s, err := app.New(ctx, cfg, log, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()

	st := store.New(re.Client)
	var live []store.Replica
	deadline := time.Now().Add(15 * time.Second)
	for len(live) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no engine heartbeat within 15s of the start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
		live, err = st.LiveReplicas(ctx)
	}
	if r := live[0]; len(live) != 1 || r.Role != "engine" || r.ExpiresIn <= 0 || r.ExpiresIn > store.EngineHeartbeatTTL || !strings.Contains(r.Heartbeat, "pid=") {
		t.Fatalf("live replicas %+v, want this engine with a heartbeat that expires within %s", live, store.EngineHeartbeatTTL)
	}
	// It stays alive past one TTL: the heartbeat is refreshed.
	time.Sleep(store.EngineHeartbeatTTL + time.Second)
	if now, err := st.LiveReplicas(ctx); err != nil || len(now) != 1 || now[0].ID != live[0].ID {
		t.Fatalf("after one heartbeat TTL the live replicas are %+v (%v), want the same engine", now, err)
	}
	_, err = handback.Run(ctx, re.Client, s.JetStream(), handback.Config{Queue: s.Queue()})
	if !errors.Is(err, handback.ErrRunning) || !strings.Contains(err.Error(), "engine "+live[0].ID) {
		t.Fatalf("handback beside a running engine: %v, want a refusal naming engine %s", err, live[0].ID)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if now, err := st.LiveReplicas(ctx); err != nil || len(now) != 0 {
		t.Errorf("after a clean stop the live replicas are %+v (%v), want none at once", now, err)
	}
	if _, err := handback.Run(ctx, re.Client, s.JetStream(), handback.Config{Queue: s.Queue()}); err != nil {
		t.Errorf("handback after the engine stopped: %v", err)
	}
}
