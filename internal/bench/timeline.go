package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/internal/queue"
)

// workSample is where the work stood at one moment of a phase: queued in Redis
// for the bridge, in the stream for the engine, out at the engine (being
// sent or waiting in a delayed nak), or waiting in JetStream.
type workSample struct {
	at              time.Duration // since the healthy stream started
	redisPending    int64         // LLEN dispatch:pending
	streamPending   uint64        // consumer NumPending: in the stream, not yet handed out
	ackPending      int           // consumer NumAckPending
	waiting         int64         // wake-ups and held deliveries in JetStream (queue.CountWaiting)
	moved           uint64        // bridge total: ids moved from dispatch:pending
	cameBack        uint64        // engine total: work items that came back (engine.WorkStats.Back)
	healthyReceived int
}

// timeline samples the environment every period from start until ctx ends.
func (env *benchEnv) timeline(ctx context.Context, start time.Time, every time.Duration, healthyReceived func() int) <-chan []workSample {
	out := make(chan []workSample, 1)
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
				s.waiting = int64(w.Scheduled + w.Held)
			}
			if info, err := env.consumerInfo(ctx); err == nil {
				s.streamPending, s.ackPending = info.NumPending, info.NumAckPending
			}
			if env.stack.Bridge() != nil {
				s.moved = env.stack.Bridge().Stats().Moved
			}
			if env.stack.Engine() != nil {
				s.cameBack = env.stack.Engine().WorkStats().Back
			}
			samples = append(samples, s)
		}
	}()
	return out
}

// timelineTable renders every n-th workSample as Markdown, with rates and
// the healthy deliveries' p99 latency between the rows shown (of those
// enqueued in that period; received are those enqueued since start).
func timelineTable(samples []workSample, n int, start time.Time, received []healthyLatency) string {
	var b strings.Builder
	b.WriteString("| t | dispatch:pending (Redis) | stream, not yet handed out | ack-pending | waiting in JetStream | moved from dispatch:pending /s | came back (wake-ups, redeliveries) /s | healthy received /s | healthy p99 (enqueued in the period) |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var prev workSample
	for i, s := range samples {
		if (i+1)%n != 0 && i != len(samples)-1 {
			continue
		}
		var lat []time.Duration
		for _, r := range received {
			if at := r.enqueued.Sub(start); at > prev.at && at <= s.at {
				lat = append(lat, r.latency)
			}
		}
		slices.Sort(lat)
		p99 := "—"
		if len(lat) > 0 {
			p99 = ms(percentile(lat, 0.99))
		}
		dt := (s.at - prev.at).Seconds()
		fmt.Fprintf(&b, "| %.0f s | %d | %d | %d | %d | %.0f | %.0f | %.0f | %s |\n", s.at.Seconds(), s.redisPending, s.streamPending, s.ackPending, s.waiting,
			float64(s.moved-prev.moved)/dt, float64(s.cameBack-prev.cameBack)/dt, float64(s.healthyReceived-prev.healthyReceived)/dt, p99)
		prev = s
	}
	return b.String()
}
