package queue

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers of waiting work. JetStream's own schedule headers are set by hand
// rather than with jetstream.WithScheduleAt, which truncates to whole
// seconds: a retry due in 2.5 s must not fire at 2 s.
const (
	// ScheduleHeader holds "@at <RFC3339>", the time a wake-up fires.
	ScheduleHeader = "Nats-Schedule"
	// ScheduleTargetHeader is the subject a wake-up fires into.
	ScheduleTargetHeader = "Nats-Schedule-Target"
	// rollupHeader with "sub" makes a new wake-up or held copy of a delivery
	// replace the one before it on the same subject.
	rollupHeader = "Nats-Rollup"
	// StaleAtHeader on a held delivery is when it reaches the stale cutoff
	// (RFC3339), so the held-check can release it to be failed on time
	// without reading its record.
	StaleAtHeader = "Jetrelay-Stale-At"
	// HeldCheckHeader marks the work item a held-check wake-up fires: its
	// body is a subscription id, not a delivery id.
	HeldCheckHeader = "Jetrelay-Held-Check"
	// WaitsHeader on a wake-up the engine scheduled for an outage (Redis
	// unreachable, a secret not stored yet) counts the handlings of the
	// work item so far: the fired item starts a new JetStream delivery
	// count, and the engine's backoff must keep growing across them.
	WaitsHeader = "Jetrelay-Waits"
)

// Waits is the WaitsHeader count a work item carries: 0 when it has none
// or an unreadable one (a wrong count only shortens a backoff).
func Waits(m jetstream.Msg) uint64 {
	n, err := strconv.ParseUint(m.Headers().Get(WaitsHeader), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// NewScheduleMsg builds deliveryID's wake-up at at: a message schedule on
// c.ScheduleSubject(deliveryID) that fires a work item for deliveryID into
// c.Subject. It carries no Nats-Msg-Id (the server strips it from the fired
// item, and the dedupe window would swallow a re-schedule); the delivery id
// travels in the body, as in every work item. Publishing it again replaces
// the pending wake-up, so a delivery has at most one.
func NewScheduleMsg(c Config, deliveryID string, at time.Time) *nats.Msg {
	c = c.WithDefaults()
	return &nats.Msg{
		Subject: c.ScheduleSubject(deliveryID),
		Data:    []byte(deliveryID),
		Header: nats.Header{
			ScheduleHeader:       []string{"@at " + at.UTC().Format(time.RFC3339Nano)},
			ScheduleTargetHeader: []string{c.Subject},
			rollupHeader:         []string{"sub"},
		},
	}
}

// NewHeldMsg builds deliveryID's held copy while subscriptionID is not
// ACTIVE: an ordinary stored message (disk, not scheduler memory) that
// nothing consumes until the subscription's held-check releases it. staleAt
// is when the delivery reaches the stale cutoff.
func NewHeldMsg(c Config, subscriptionID, deliveryID string, staleAt time.Time) *nats.Msg {
	return &nats.Msg{
		Subject: c.HeldSubject(subscriptionID, deliveryID),
		Data:    []byte(deliveryID),
		Header: nats.Header{
			StaleAtHeader: []string{staleAt.UTC().Format(time.RFC3339Nano)},
			rollupHeader:  []string{"sub"},
		},
	}
}

// NewHeldCheckMsg builds subscriptionID's held-check wake-up at at: a
// message schedule on c.HeldCheckSubject(subscriptionID) whose fired item
// tells an engine to look whether the subscription is ACTIVE again (and
// release its held deliveries) or whether some reached the stale cutoff.
// Every hold publishes it for the same whole period, so a subscription has
// one pending check however many deliveries it holds.
func NewHeldCheckMsg(c Config, subscriptionID string, at time.Time) *nats.Msg {
	c = c.WithDefaults()
	return &nats.Msg{
		Subject: c.HeldCheckSubject(subscriptionID),
		Data:    []byte(subscriptionID),
		Header: nats.Header{
			ScheduleHeader:       []string{"@at " + at.UTC().Format(time.RFC3339Nano)},
			ScheduleTargetHeader: []string{c.Subject},
			rollupHeader:         []string{"sub"},
			HeldCheckHeader:      []string{"1"},
		},
	}
}
