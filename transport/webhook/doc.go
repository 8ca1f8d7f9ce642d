// Package webhook is jetrelay's HTTP transport: it POSTs a delivery to an
// http:// or https:// subscription URL with the Cycles headers (identity,
// signature, trace context) and the subscription's custom headers, and says
// what the receiver answered.
//
// It speaks HTTP/1.1 only, requires TLS 1.2 or later with verification,
// never follows redirects, never uses a proxy, reads at most a bounded part
// of the response headers and body (then discards the body, so the
// connection can be reused) and bounds every attempt by a deadline, so one
// slow or hostile receiver cannot hold a worker. Config.CheckURL and
// Config.DialContext are where a destination policy (internal/ssrf) plugs in.
package webhook
