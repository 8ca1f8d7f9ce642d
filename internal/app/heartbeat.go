package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

// engineHeartbeat is a running engine's liveness in Redis
// (store.EngineHeartbeatKey, listed in store.EnginesSet): the positive
// signal `jetrelay handback` refuses on and `jetrelay status` can list. It
// lives store.EngineHeartbeatTTL past its last refresh, so a killed engine
// stops counting as alive within seconds.
type engineHeartbeat struct {
	st    *store.Store
	log   *slog.Logger
	id    string
	host  string
	every time.Duration
}

func newEngineHeartbeat(st *store.Store, log *slog.Logger) *engineHeartbeat {
	host, _ := os.Hostname()
	// Host name and pid name the process for an operator; the random part
	// keeps two engines apart that share both (containers, a restart).
	var r [3]byte
	_, _ = rand.Read(r[:])
	return &engineHeartbeat{st: st, log: log, host: host, every: store.EngineHeartbeatTTL / 3,
		id: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(r[:]))}
}

func (h *engineHeartbeat) beat(ctx context.Context) error {
	v := fmt.Sprintf("pid=%d host=%s beat_at_ms=%d", os.Getpid(), h.host, time.Now().UnixMilli())
	return h.st.BeatEngine(ctx, h.id, v, store.EngineHeartbeatTTL)
}

// loop refreshes the heartbeat every third of its TTL until ctx ends.
func (h *engineHeartbeat) loop(ctx context.Context) {
	store.KeepBeating(ctx, h.every, h.beat, h.log,
		"engine heartbeat refresh failed; `jetrelay handback` may take this engine for stopped")
}

// runEngine runs the engine under its heartbeat: the first beat is written
// before the engine takes any work, the heartbeat goes on through the drain
// after ctx ends (the engine still settles work then), and it is removed
// once the engine has returned, so a cleanly stopped engine no longer
// counts as alive.
func (s *Stack) runEngine(ctx context.Context) error {
	h := newEngineHeartbeat(store.New(s.rdb), s.log.With("component", "engine"))
	if err := h.beat(ctx); err != nil {
		h.log.Warn("engine heartbeat not written; retrying", "err", err)
	}
	h.log.Info("engine heartbeat", "key", store.EngineHeartbeatKey(h.id), "ttl", store.EngineHeartbeatTTL)
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { h.loop(beatCtx); close(done) }()

	err := s.engine.Run(ctx)

	stopBeat()
	<-done
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if rmErr := h.st.StopEngine(rmCtx, h.id); rmErr != nil {
		h.log.Warn("engine heartbeat not removed; it expires by itself", "err", rmErr, "ttl", store.EngineHeartbeatTTL)
	}
	return err
}
