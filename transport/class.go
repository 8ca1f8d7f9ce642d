package transport

import (
	"errors"
	"time"
)

// Class is what an attempt's (Result, error) pair means for the delivery.
// Transports never return a Class; they return a Result and an error, and
// Classify reads them: it is the one reading, used by the engine and by the
// conformance kit.
type Class int

// Classes of an attempt.
const (
	// Accepted: the destination took the event.
	Accepted Class = iota + 1
	// Retryable: no answer, or an answer that was not an acceptance; the
	// subscription's retry policy decides when to try again.
	Retryable
	// Throttle: the destination asked to slow down, possibly naming a wait.
	Throttle
	// Fatal: an error marked Permanent; no retry can fix it.
	Fatal
)

func (c Class) String() string {
	switch c {
	case Accepted:
		return "accepted"
	case Retryable:
		return "retryable"
	case Throttle:
		return "throttled"
	case Fatal:
		return "permanent"
	}
	return "Class(?)"
}

// Classify says what res and err from Deliver mean, and the wait a
// throttling destination asked for (0 when none). A Permanent error wins
// over everything; any other error is retryable; without an error, the
// Result's Outcome decides, and an unknown Outcome is retryable.
func Classify(res Result, err error) (Class, time.Duration) {
	switch {
	case errors.Is(err, ErrPermanent):
		return Fatal, 0
	case err != nil:
		return Retryable, 0
	case res.Outcome == Delivered:
		return Accepted, 0
	case res.Outcome == Throttled:
		return Throttle, max(res.RetryAfter, 0)
	}
	return Retryable, 0
}
