package bridge

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

// Queue modes a bridge announces in its heartbeat (Config.QueueMode).
const (
	EmbeddedQueue = "embedded" // a JetStream inside this process: a queue of its own
	ExternalQueue = "nats"     // a NATS server or cluster other replicas may share
)

// heartbeatLoop keeps this instance's heartbeat key alive every TTL/3, so a
// couple of missed refreshes do not yet let another bridge adopt our list.
func (b *Bridge) heartbeatLoop(ctx context.Context) {
	store.KeepBeating(ctx, b.cfg.HeartbeatTTL/3, b.beat, b.log,
		"heartbeat refresh failed; other bridges may adopt this instance's processing list")
}

// beat writes the heartbeat key with its TTL (the value is for operators)
// and keeps this instance in the jetrelay:bridges registry, which is how
// other bridges find processing lists to adopt without scanning Redis.
func (b *Bridge) beat(ctx context.Context) error {
	v := fmt.Sprintf("pid=%d beat_at_ms=%d", os.Getpid(), time.Now().UnixMilli())
	if b.cfg.QueueMode != "" {
		v += " queue=" + b.cfg.QueueMode
	}
	return b.store.Beat(ctx, b.cfg.InstanceID, v, b.cfg.HeartbeatTTL)
}

// InstanceID is this bridge's instance id (Config.InstanceID, or the host
// name it defaulted to).
func (b *Bridge) InstanceID() string { return b.cfg.InstanceID }
