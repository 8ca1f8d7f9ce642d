// Package transporttest is the conformance suite every jetrelay transport
// runs from its own tests, built-in or plugin:
//
//	func TestConformance(t *testing.T) { transporttest.Run(t, harness) }
//
// The suite checks the transport.Transport contract a destination's owner
// relies on: acceptances, rejections and throttling classified as such;
// deadlines and cancellation honoured; the event's identity, signature and
// trace context carried; concurrent use; no goroutine left behind; and
// hostile or malformed targets refused with a clear, permanent error that
// never quotes a credential; reserved custom headers never replacing the
// relay's; connection errors free of the URL's credentials; and connections
// made through the host's dialer. A transport declares what it cannot do by
// leaving the matching Harness hook nil. It imports nothing from jetrelay
// but the transport and proto packages, so a plugin in another module can
// use it.
package transporttest
