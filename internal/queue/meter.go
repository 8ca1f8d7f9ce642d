package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Waiting counts the work that waits in the dispatch stream.
type Waiting struct {
	// Scheduled is pending wake-ups: retries after their backoff, put-offs
	// (open breaker, busy subscription) and held-checks.
	Scheduled uint64
	// Held is deliveries held for a PAUSED or DISABLED subscription.
	Held uint64
}

// meterName is the durable that counts the messages on one waiting
// subject wildcard.
func meterName(c Config, kind string) string { return c.Consumer + "-meter-" + kind }

// CountWaiting counts the scheduled and held messages in the stream.
//
// A stream info with a subject filter lists every matching subject (one per
// waiting delivery: 100,000 entries for 100,000 held deliveries) on every
// call. Instead each kind has a durable "meter" consumer filtered on its
// wildcard that nothing ever pulls from: its NumPending is the number of
// matching messages in the stream, which the server keeps up to date as
// they come and go, and a consumer info is one small answer. The meters are
// created on first use; a work-queue stream allows them because their
// filters overlap no other consumer's (held deliveries are released by
// direct reads, not by a consumer).
func CountWaiting(ctx context.Context, js jetstream.JetStream, c Config) (Waiting, error) {
	c = c.WithDefaults()
	sched, err := meter(ctx, js, c, "sched", c.ScheduleSubjects())
	if err != nil {
		return Waiting{}, err
	}
	held, err := meter(ctx, js, c, "held", c.HeldSubjects(""))
	if err != nil {
		return Waiting{}, err
	}
	return Waiting{Scheduled: sched, Held: held}, nil
}

func meter(ctx context.Context, js jetstream.JetStream, c Config, kind, filter string) (uint64, error) {
	name := meterName(c, kind)
	cons, err := js.Consumer(ctx, c.Stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = js.CreateOrUpdateConsumer(ctx, c.Stream, jetstream.ConsumerConfig{
			Durable:       name,
			Description:   "jetrelay: counts " + filter + " (never pulled)",
			FilterSubject: filter,
			AckPolicy:     jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
	}
	if err != nil {
		return 0, fmt.Errorf("queue: meter %s: %w", name, err)
	}
	return cons.CachedInfo().NumPending, nil
}

// IsScheduled reports whether deliveryID has a pending wake-up.
func IsScheduled(ctx context.Context, js jetstream.JetStream, c Config, deliveryID string) (bool, error) {
	return hasMsg(ctx, js, c, c.ScheduleSubject(deliveryID))
}

// IsHeld reports whether deliveryID is held for subscriptionID.
func IsHeld(ctx context.Context, js jetstream.JetStream, c Config, subscriptionID, deliveryID string) (bool, error) {
	return hasMsg(ctx, js, c, c.HeldSubject(subscriptionID, deliveryID))
}

func hasMsg(ctx context.Context, js jetstream.JetStream, c Config, subject string) (bool, error) {
	st, err := js.Stream(ctx, c.WithDefaults().Stream)
	if err != nil {
		return false, err
	}
	_, err = st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}
