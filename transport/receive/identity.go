package receive

import (
	"net/http"
	"strings"

	"github.com/jetrelay/jetrelay/proto"
)

// MaxEventIDLength bounds an accepted X-Cycles-Event-Id. Cycles ids are
// "evt_" plus 32 hex; the bound only keeps a hostile id out of the stores.
const MaxEventIDLength = 256

// Identity is what a delivery says about itself in its headers (webhook),
// NATS headers or SQS message attributes.
type Identity struct {
	EventID     string // X-Cycles-Event-Id: the dedupe key
	EventType   string // X-Cycles-Event-Type
	TraceID     string // X-Cycles-Trace-Id
	Traceparent string // traceparent
	RequestID   string // X-Request-Id, may be empty
	Signature   string // X-Cycles-Signature, empty when unsigned

	// Standard Webhooks, empty unless the subscription uses them.
	WebhookID        string // webhook-id (the event id)
	WebhookTimestamp string // webhook-timestamp, Unix seconds of the attempt
	WebhookSignature string // webhook-signature, "v1,<base64>" (several during a rotation)
}

// IdentityHeaders returns the header names of an Identity, in the order the
// sender writes them. A forwarder passes exactly these on.
func IdentityHeaders() []string {
	return []string{
		proto.HeaderEventID, proto.HeaderEventType, proto.HeaderTraceID,
		proto.HeaderTraceparent, proto.HeaderRequestID, proto.HeaderSignature,
		proto.HeaderWebhookID, proto.HeaderWebhookTimestamp, proto.HeaderWebhookSignature,
	}
}

// IdentityFrom reads an Identity through get, which looks a header up by its
// name as the sender writes it.
func IdentityFrom(get func(name string) string) Identity {
	return Identity{
		EventID:     get(proto.HeaderEventID),
		EventType:   get(proto.HeaderEventType),
		TraceID:     get(proto.HeaderTraceID),
		Traceparent: get(proto.HeaderTraceparent),
		RequestID:   get(proto.HeaderRequestID),
		Signature:   get(proto.HeaderSignature),

		WebhookID:        get(proto.HeaderWebhookID),
		WebhookTimestamp: get(proto.HeaderWebhookTimestamp),
		WebhookSignature: get(proto.HeaderWebhookSignature),
	}
}

// IdentityFromHTTP reads the Identity of a webhook request.
func IdentityFromHTTP(h http.Header) Identity { return IdentityFrom(h.Get) }

// ValidEventID reports whether id can be a dedupe key: present, bounded, and
// free of control characters (it ends up in logs and store keys).
func ValidEventID(id string) bool {
	if id == "" || len(id) > MaxEventIDLength {
		return false
	}
	return !strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
