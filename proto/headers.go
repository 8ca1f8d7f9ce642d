package proto

import "strings"

// Header names of a webhook request, as the reference sends them (§6.8).
// Go's http.Header canonicalises names on Set; receivers match them
// case-insensitively, as HTTP requires.
const (
	HeaderContentType = "Content-Type"
	HeaderUserAgent   = "User-Agent"
	HeaderEventID     = "X-Cycles-Event-Id"
	HeaderEventType   = "X-Cycles-Event-Type"
	HeaderTraceID     = "X-Cycles-Trace-Id"
	HeaderTraceparent = "traceparent"
	HeaderRequestID   = "X-Request-Id"
	HeaderSignature   = "X-Cycles-Signature"
)

// ReservedHeader reports whether name (any case) is one a subscription's
// custom headers may not set: Content-Type, User-Agent, any X-Cycles-*,
// X-Request-Id, traceparent, tracestate, the Standard Webhooks headers
// (webhook-id, webhook-timestamp, webhook-signature), and the hop-by-hop and framing
// headers (Host, Content-Length, Transfer-Encoding, Connection, Keep-Alive,
// Proxy-Connection, Upgrade, Expect, TE, Trailer).
func ReservedHeader(name string) bool {
	lower := strings.ToLower(name)
	switch lower {
	// Written by the relay itself: a duplicate would become a second value
	// (two Content-Types, a forged request id).
	case "content-type", "user-agent", "x-request-id", "traceparent", "tracestate":
		return true
	// Standard Webhooks: a stored value would forge or break the signature.
	case HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature:
		return true
	// Hop-by-hop and framing: the HTTP client must own them.
	case "host", "content-length", "transfer-encoding", "connection", "keep-alive",
		"proxy-connection", "upgrade", "expect", "te", "trailer":
		return true
	}
	// Every X-Cycles-* header, present or future, including the signature.
	return strings.HasPrefix(lower, "x-cycles-")
}

// ValidHeaderName reports whether name is an RFC 7230 token, the only form
// a header field name may take.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether v can be sent as a header field value:
// no control characters other than horizontal tab. CR and LF in particular
// would let a stored value inject headers or split the request.
func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x20 && c != '\t') || c == 0x7F {
			return false
		}
	}
	return true
}

// isTokenChar is RFC 7230's tchar.
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
