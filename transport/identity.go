package transport

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jetrelay/jetrelay/proto"
)

// Header is one header, or message attribute, a transport sends.
type Header struct {
	Name, Value string
}

// IdentityHeaders are what every transport sends alike for req, as headers
// or message attributes under the webhook's names, in the reference's order
// (contract §6.8), so that any consumer verifies and deduplicates the same
// way:
//
//	Content-Type        application/json, always
//	X-Cycles-Event-Id   always: the consumer's dedup key
//	X-Cycles-Event-Type always
//	X-Cycles-Trace-Id   when req has a trace id (the engine always sets one)
//	traceparent         when req has one (the engine always sets one); lowercase, as W3C spells it
//	X-Request-Id        when req.RequestID is not blank
//	X-Cycles-Signature  when the delivery is signed
//	webhook-id, webhook-timestamp, webhook-signature
//	                    when the subscription uses Standard Webhooks
//	                    (req.WebhookSignature is set); lowercase, as the
//	                    specification spells them
//
// A value with a control character (CR, LF, NUL, …) could inject a header or
// split a message: the error says which header, never the value, and the
// transport returns it as Permanent. Protocol headers (HTTP's User-Agent,
// Nats-Msg-Id) are the transport's own to add.
func IdentityHeaders(req *Request) ([]Header, error) {
	all := []struct {
		name, value string
		send        bool
	}{
		{proto.HeaderContentType, "application/json", true},
		{proto.HeaderEventID, req.EventID, true},
		{proto.HeaderEventType, req.EventType, true},
		{proto.HeaderTraceID, req.TraceID, req.TraceID != ""},
		{proto.HeaderTraceparent, req.Traceparent, req.Traceparent != ""},
		{proto.HeaderRequestID, req.RequestID, strings.TrimSpace(req.RequestID) != ""},
		{proto.HeaderSignature, req.Signature, req.Signature != ""},
		{proto.HeaderWebhookID, req.WebhookID, req.WebhookSignature != ""},
		{proto.HeaderWebhookTimestamp, req.WebhookTimestamp, req.WebhookSignature != ""},
		{proto.HeaderWebhookSignature, req.WebhookSignature, req.WebhookSignature != ""},
	}
	out := make([]Header, 0, len(all))
	for _, h := range all {
		if !h.send {
			continue
		}
		if !proto.ValidHeaderValue(h.value) {
			return nil, fmt.Errorf("value of header %s contains control characters (CR, LF, NUL, ...)", h.name)
		}
		out = append(out, Header{h.name, h.value})
	}
	return out, nil
}

// CustomHeaders checks the subscription's custom headers (req.Headers) and
// returns them sorted by name, so that a set with two bad headers always
// reports the same one. It refuses a set over the size bounds
// (CheckHeaderSetSize), a name that is not an RFC 7230 token, a name the
// relay reserves (proto.ReservedHeader) or the transport's protocol reserves
// (reserved, may be nil, e.g. Nats-*), and a value with control characters.
// Errors name the header, never its value; a transport returns them as
// Permanent.
func CustomHeaders(req *Request, reserved func(name string) bool) ([]Header, error) {
	if err := CheckHeaderSetSize(req.Headers); err != nil {
		return nil, err
	}
	if len(req.Headers) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(req.Headers))
	for name := range req.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]Header, 0, len(names))
	for _, name := range names {
		value := req.Headers[name]
		switch {
		case !proto.ValidHeaderName(name):
			return nil, fmt.Errorf("custom header name %q is not a valid HTTP header name", name)
		case proto.ReservedHeader(name) || (reserved != nil && reserved(name)):
			return nil, fmt.Errorf("custom header %s is reserved: the relay or the transport's protocol sets it", name)
		case !proto.ValidHeaderValue(value):
			return nil, fmt.Errorf("value of header %s contains control characters (CR, LF, NUL, ...)", name)
		}
		out = append(out, Header{name, value})
	}
	return out, nil
}
