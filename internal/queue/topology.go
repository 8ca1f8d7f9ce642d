package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamConfig is the stream EnsureStream creates for c (defaults applied).
func StreamConfig(c Config) jetstream.StreamConfig {
	c = c.WithDefaults()
	return jetstream.StreamConfig{
		Name:       c.Stream,
		Subjects:   []string{c.Subject},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Discard:    jetstream.DiscardNew,
		MaxMsgs:    c.MaxMsgs,
		MaxBytes:   c.MaxBytes,
		Duplicates: c.Duplicates,
		Replicas:   c.Replicas,
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
		st, err = js.UpdateStream(ctx, want)
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
		have.MaxBytes != want.MaxBytes || have.MaxAge != want.MaxAge
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
