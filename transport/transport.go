package transport

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Transport sends one delivery to one destination.
//
// Deliver must be safe for concurrent use. It must honour ctx: when ctx is
// done it returns promptly with ctx's error. It must not retain req or
// req.Body after it returns.
//
// The contract on results: when the destination answered, Deliver returns a
// Result and a nil error, whatever the answer was (a 503 is a Result with
// Outcome Failed, a 429 with a Retry-After is Throttled). It returns a
// non-nil error only when it got no answer at all (refused, timed out, reset,
// TLS failure); such errors are retryable unless marked Permanent, which is
// for requests that can never succeed as they stand (an invalid target, a
// forbidden header).
type Transport interface {
	Deliver(ctx context.Context, req *Request) (Result, error)
}

// Request is one attempt to deliver one event to one subscription.
// Every transport carries the same identity, signature and trace context, so
// any receiver can verify and deduplicate the same way.
type Request struct {
	URL            string            // the subscription's destination URL
	Body           []byte            // the stored event JSON, byte for byte
	EventID        string            // X-Cycles-Event-Id: the receiver's dedup key
	EventType      string            // X-Cycles-Event-Type
	Signature      string            // "sha256=<hex>" over Body, or "" when the subscription has no secret
	TraceID        string            // X-Cycles-Trace-Id: 32 lowercase hex
	Traceparent    string            // W3C traceparent for this attempt
	RequestID      string            // X-Request-Id, or ""
	Headers        map[string]string // the subscription's custom headers; shared with other requests, read-only
	DeliveryID     string            // for logs and transports that key on it
	SubscriptionID string            // e.g. a FIFO message group
	Attempt        int               // 1-based attempt number

	// Standard Webhooks (sent only when WebhookSignature is set, beside
	// Signature, which is unchanged): webhook-id (the event id, stable
	// across retries), webhook-timestamp (Unix seconds of this attempt) and
	// webhook-signature ("v1,<base64>", space-separated during a rotation).
	WebhookID, WebhookTimestamp, WebhookSignature string
}

// Outcome classifies a destination's answer.
type Outcome int

// Outcomes a transport reports in a Result.
const (
	// Delivered: the destination accepted the event (HTTP 2xx, a PubAck, …).
	Delivered Outcome = iota + 1
	// Failed: the destination answered but did not accept it (non-2xx).
	// The engine retries according to the subscription's policy.
	Failed
	// Throttled: the destination asked the sender to slow down (429, or 503
	// with Retry-After). Result.RetryAfter holds the wait it asked for, if any.
	Throttled
)

func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Failed:
		return "failed"
	case Throttled:
		return "throttled"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is what a destination answered.
type Result struct {
	Outcome    Outcome
	StatusCode int           // protocol status (HTTP status), 0 when the protocol has none
	Latency    time.Duration // from the start of the send to the answer
	RetryAfter time.Duration // the wait the destination asked for, 0 if none
	Message    string        // short human summary, e.g. "HTTP 503"; empty on success
	// Reason names an answer of a protocol that is not HTTP (a broker's
	// refusal, a full queue), e.g. "nats_stream_full": it is the metric
	// reason and trace error type of the failed send instead of the
	// http_4xx/http_5xx the engine derives from StatusCode. A fixed,
	// small set of constants per transport (see ValidReason); empty for
	// HTTP answers and on success.
	Reason string
}

// ErrPermanent marks an error that no retry can fix. Test with errors.Is.
var ErrPermanent = errors.New("permanent")

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds and the
// engine fails the delivery instead of retrying it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }
