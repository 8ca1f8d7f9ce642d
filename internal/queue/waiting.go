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
	// HeldReasonHeader on a held delivery says why it is held: ReasonBreakerOpen
	// for a delivery its subscription's open circuit breaker holds back;
	// absent for one held because its subscription is PAUSED or DISABLED.
	HeldReasonHeader = "Jetrelay-Held-Reason"
	// ReleaseByHeader on a delivery an open breaker holds is when it must be
	// released at the latest (RFC3339): the earlier of its retry schedule's
	// end, when it gets its last-chance send, and the stale cutoff.
	ReleaseByHeader = "Jetrelay-Release-By"
	// HeldAtHeader on a delivery an open breaker holds is when it was held
	// (RFC3339): evidence that the endpoint recovered (an operator's change,
	// a success) releases the deliveries held before it.
	HeldAtHeader = "Jetrelay-Held-At"
	// ProbeAtHeader on a held-check is when it next releases one of the
	// deliveries an open breaker holds as the breaker's probe (RFC3339).
	ProbeAtHeader = "Jetrelay-Probe-At"
	// ProbeEveryHeader on a held-check is the time between two probes of
	// the subscription's open breaker (a Go duration), doubling up to the
	// breaker's MaxOpenFor while the endpoint stays down.
	ProbeEveryHeader = "Jetrelay-Probe-Every"
	// EvidenceAtHeader on a held-check is when a send to the subscription
	// succeeded through its open breaker (RFC3339), and on a work item the
	// held-check released for such evidence, the evidence's time: it
	// closes breakers opened before it on whichever replica takes the item.
	EvidenceAtHeader = "Jetrelay-Evidence-At"
	// ReleasedHeader on a work item says why the held-check released it
	// from an open breaker's hold: ReleasedEvidence, ReleasedProbe or
	// ReleasedDue. Such an item is the delivery's only copy.
	ReleasedHeader = "Jetrelay-Released"
	// WaitsHeader on a wake-up the engine scheduled for an outage (Redis
	// unreachable, a secret not stored yet) counts the handlings of the
	// work item so far: the fired item starts a new JetStream delivery
	// count, and the engine's backoff must keep growing across them.
	WaitsHeader = "Jetrelay-Waits"
	// UnparkedHeader on a work item says a bridge published it from the
	// deliveries it had parked at intake (bridge/park.go): work that comes
	// back, which the engine takes after new work, as fired wake-ups.
	UnparkedHeader = "Jetrelay-Unparked"
)

// Values of HeldReasonHeader and ReleasedHeader.
const (
	// ReasonBreakerOpen marks a delivery held by an open circuit breaker.
	ReasonBreakerOpen = "breaker_open"
	// ReleasedEvidence: released because the endpoint showed it is back.
	ReleasedEvidence = "evidence"
	// ReleasedProbe: released as the open breaker's probe.
	ReleasedProbe = "probe"
	// ReleasedDue: released at its release-by time, for its last chance.
	ReleasedDue = "due"
	// ReleasedInactive: released because its subscription is no longer
	// ACTIVE, to be held again as the subscription's.
	ReleasedInactive = "inactive"
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

// NewBreakerHeldMsg builds deliveryID's held copy while subscriptionID's
// circuit breaker is open: like NewHeldMsg, on the same subject (so
// handback, metrics and IsHeld see it as held), plus why, since when and
// until when at the latest. Its StaleAtHeader carries releaseBy too: a
// held-check that only knows the stale cutoff releases it on time.
func NewBreakerHeldMsg(c Config, subscriptionID, deliveryID string, releaseBy, heldAt time.Time) *nats.Msg {
	m := NewHeldMsg(c, subscriptionID, deliveryID, releaseBy)
	m.Header.Set(HeldReasonHeader, ReasonBreakerOpen)
	m.Header.Set(ReleaseByHeader, releaseBy.UTC().Format(time.RFC3339Nano))
	m.Header.Set(HeldAtHeader, heldAt.UTC().Format(time.RFC3339Nano))
	return m
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
