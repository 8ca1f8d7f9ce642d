package transport

import "errors"

// ErrBlocked marks a send that a destination policy refused before anything
// was sent (an address in a blocked range, a URL outside the allowed
// patterns, plain http where https is required). Test with errors.Is. Every
// blocked error is also permanent, so code that only knows ErrPermanent
// still fails the delivery instead of retrying it; the engine tells the two
// apart to record the reason ssrf_blocked and to leave the subscription's
// failure count alone.
var ErrBlocked = errors.New("blocked by destination policy")

// Blocked wraps err so that both errors.Is(err, ErrBlocked) and
// errors.Is(err, ErrPermanent) hold. Its message is err's.
func Blocked(err error) error {
	if err == nil {
		return nil
	}
	return &blockedError{err}
}

type blockedError struct{ err error }

func (e *blockedError) Error() string { return e.err.Error() }
func (e *blockedError) Unwrap() error { return e.err }
func (e *blockedError) Is(target error) bool {
	return target == ErrBlocked || target == ErrPermanent
}
