package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// workSample is where the work stood at one moment of a phase: queued in Redis
// for the bridge, in the stream for the engine, out at the engine (being
// sent or waiting in a delayed nak), or parked.
type workSample struct {
	at              time.Duration // since the healthy stream started
	redisPending    int64         // LLEN dispatch:pending
	streamPending   uint64        // consumer NumPending: in the stream, not yet handed out
	ackPending      int           // consumer NumAckPending
	parked          int64         // wake-ups and held deliveries in JetStream (queue.CountWaiting)
	moved, returned uint64        // bridge totals: ids moved from dispatch:pending, parked ones brought back
	healthyReceived int
}

// timeline samples the environment every period until ctx ends.
func (env *benchEnv) timeline(ctx context.Context, every time.Duration, healthyReceived func() int) <-chan []workSample {
	out := make(chan []workSample, 1)
	start := time.Now()
	go func() {
		var samples []workSample
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				out <- samples
				return
			case <-t.C:
			}
			s := workSample{at: time.Since(start), healthyReceived: healthyReceived()}
			s.redisPending, _ = env.adminDB.LLen(ctx, "dispatch:pending").Result()
			if w, err := queue.CountWaiting(ctx, env.stack.JetStream(), queue.Config{Stream: env.cfg.Stream, Subject: env.cfg.Subject, Consumer: env.cfg.Consumer}); err == nil {
				s.parked = int64(w.Scheduled + w.Held)
			}
			if info, err := env.consumerInfo(ctx); err == nil {
				s.streamPending, s.ackPending = info.NumPending, info.NumAckPending
			}
			if env.stack.Bridge() != nil {
				st := env.stack.Bridge().Stats()
				s.moved, s.returned = st.Moved, st.Undeferred
			}
			samples = append(samples, s)
		}
	}()
	return out
}

// timelineTable renders every n-th workSample as Markdown, with rates between
// the rows shown.
func timelineTable(samples []workSample, n int) string {
	var b strings.Builder
	b.WriteString("| t | dispatch:pending (Redis) | stream, not yet handed out | ack-pending | parked | moved from dispatch:pending /s | brought back from parking /s | healthy received /s |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var prev workSample
	for i, s := range samples {
		if (i+1)%n != 0 && i != len(samples)-1 {
			continue
		}
		dt := (s.at - prev.at).Seconds()
		fmt.Fprintf(&b, "| %.0f s | %d | %d | %d | %d | %.0f | %.0f | %.0f |\n", s.at.Seconds(), s.redisPending, s.streamPending, s.ackPending, s.parked,
			float64(s.moved-prev.moved)/dt, float64(s.returned-prev.returned)/dt, float64(s.healthyReceived-prev.healthyReceived)/dt)
		prev = s
	}
	return b.String()
}
