package bridge

import (
	"context"
	"fmt"
	"os"
	"time"
)

// heartbeatLoop keeps this instance's heartbeat key alive every TTL/3, so a
// couple of missed refreshes do not yet let another bridge adopt our list.
func (b *Bridge) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(b.cfg.HeartbeatTTL / 3)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := b.beat(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			b.log.Warn("heartbeat refresh failed; other bridges may adopt this instance's processing list", "err", err)
			failing = true
		case err == nil && failing:
			b.log.Info("heartbeat refresh works again")
			failing = false
		}
	}
}

// beat writes the heartbeat key with its TTL (the value is for operators)
// and keeps this instance in the jetrelay:bridges registry, which is how
// other bridges find processing lists to adopt without scanning Redis.
func (b *Bridge) beat(ctx context.Context) error {
	v := fmt.Sprintf("pid=%d beat_at_ms=%d", os.Getpid(), time.Now().UnixMilli())
	return b.store.Beat(ctx, b.cfg.InstanceID, v, b.cfg.HeartbeatTTL)
}

// InstanceID is this bridge's instance id (Config.InstanceID, or the host
// name it defaulted to).
func (b *Bridge) InstanceID() string { return b.cfg.InstanceID }
