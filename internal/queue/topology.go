package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfig is the stream EnsureStream creates for c (defaults applied).
//
// Besides the work items on c.Subject it holds the waiting work (subjects.go):
// wake-ups as message schedules, and held deliveries. That decides its
// limits: the stream has none. The server refuses schedules on a DiscardNew
// stream, and MaxAge, MaxMsgs or MaxBytes with DiscardOld would silently
// delete pending wake-ups and held deliveries, which are the only copy of
// that work. c.MaxMsgs and c.MaxBytes are enforced by the bridge instead
// (back-pressure before it moves new ids out of Redis, see CheckRoom), so a
// full stream slows intake and never evicts anything. It also holds a
// keeper message per bridge (keeper.go), so that it is never empty.
func StreamConfig(c Config) jetstream.StreamConfig {
	c = c.WithDefaults()
	return jetstream.StreamConfig{
		Name:              c.Stream,
		Subjects:          []string{c.Subject, c.ScheduleSubjects(), c.HeldSubjects(""), c.OrderedSubjects(), c.KeeperSubjects()},
		Retention:         jetstream.WorkQueuePolicy,
		Storage:           jetstream.FileStorage,
		Discard:           jetstream.DiscardOld,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		Duplicates:        c.Duplicates,
		Replicas:          c.Replicas,
		AllowMsgSchedules: true,
	}
}

// ConsumerConfig is the durable consumer EnsureConsumer creates for c
// (defaults applied). It has no BackOff on purpose: BackOff rewrites
// AckWait and distorts every NakWithDelay, and retry timing belongs to the
// engine.
func ConsumerConfig(c Config) jetstream.ConsumerConfig {
	c = c.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:       c.Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// Only work items: wake-ups wait on their own subjects until they
		// fire into c.Subject, and held deliveries wait until released.
		FilterSubject: c.Subject,
		AckWait:       c.AckWait,
		MaxAckPending: c.MaxAckPending,
		MaxDeliver:    c.MaxDeliver,
	}
}

// EnsureStream creates the dispatch stream, or updates it when the settings
// jetrelay owns have drifted from c. It is idempotent, so every bridge and
// engine process calls it at start-up. An existing stream that already
// matches is left alone: an update racing a consumer create trips a data race
// inside nats-server v2.15.2 (fileStore.UpdateConfig vs ConsumerStore), and
// an unneeded update is wasted raft traffic on a cluster anyway.
func EnsureStream(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Stream, error) {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	want := StreamConfig(c)
	st, err := js.Stream(ctx, c.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		st, err = js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return EnsureStream(ctx, js, c) // another process created it first
		}
	case err == nil && streamDrifted(st.CachedInfo().Config, want):
		// The consumer of an older jetrelay reads the whole stream: narrow
		// it first, or it would take (and ack away) wake-ups and held
		// deliveries the moment the stream starts to hold them.
		if err = narrowConsumer(ctx, js, c); err == nil {
			st, err = js.UpdateStream(ctx, want)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: ensure stream %s: %w", c.Stream, err)
	}
	return st, nil
}

// streamDrifted reports whether any setting StreamConfig decides differs.
func streamDrifted(have, want jetstream.StreamConfig) bool {
	return !slices.Equal(have.Subjects, want.Subjects) ||
		have.Retention != want.Retention || have.Storage != want.Storage ||
		have.Discard != want.Discard || have.Replicas != want.Replicas ||
		have.Duplicates != want.Duplicates || have.MaxMsgs != want.MaxMsgs ||
		have.MaxBytes != want.MaxBytes || have.MaxAge != want.MaxAge ||
		have.AllowMsgSchedules != want.AllowMsgSchedules
}

// narrowConsumer sets the work-item filter on an existing consumer that has
// none. A missing consumer is fine: EnsureConsumer creates it filtered.
func narrowConsumer(ctx context.Context, js jetstream.JetStream, c Config) error {
	cons, err := js.Consumer(ctx, c.Stream, c.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	cc := cons.CachedInfo().Config
	if cc.FilterSubject != "" || len(cc.FilterSubjects) > 0 {
		return nil
	}
	cc.FilterSubject = c.Subject
	_, err = js.UpdateConsumer(ctx, c.Stream, cc)
	return err
}

// EnsureConsumer creates the shared durable pull consumer or updates it to
// c. The stream must exist (see EnsureStream).
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Consumer, error) {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, c.Stream, ConsumerConfig(c))
	if err != nil {
		return nil, fmt.Errorf("queue: ensure consumer %s on %s: %w", c.Consumer, c.Stream, err)
	}
	return cons, nil
}
