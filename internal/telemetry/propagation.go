package telemetry

import (
	"context"
	"encoding/hex"
	"hash/fnv"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/proto"
)

// NATSCarrier reads and writes W3C trace context in NATS headers under
// their exact (lowercase) names: nats.Header is case-sensitive, and
// http.Header would canonicalize "traceparent" to "Traceparent".
type NATSCarrier nats.Header

// Get returns the first value of key k.
func (c NATSCarrier) Get(k string) string { return nats.Header(c).Get(k) }

// Set replaces the values of key k with v.
func (c NATSCarrier) Set(k, v string) { nats.Header(c).Set(k, v) }

// Keys lists the header names.
func (c NATSCarrier) Keys() []string {
	ks := make([]string, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	return ks
}

// DeliveryParent returns ctx carrying the remote span context that stands
// for the event a delivery belongs to: the delivery's trace_id (when valid)
// with a span id derived from the delivery id, so that every span made for
// one delivery, by any process, shares one trace and one parent. flags is
// the 2-hex trace-flags field the delivery's outbound traceparent carries
// (proto.InboundTraceFlags). Without a usable trace id ctx is returned as
// is, and spans under it start a trace of their own.
func DeliveryParent(ctx context.Context, deliveryID, traceID, flags string) context.Context {
	var tid trace.TraceID
	if !proto.ValidTraceID(traceID) {
		return ctx
	}
	if _, err := hex.Decode(tid[:], []byte(traceID)); err != nil {
		return ctx
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(deliveryID))
	var sid trace.SpanID
	copy(sid[:], h.Sum(nil))
	if !sid.IsValid() {
		sid[7] = 1
	}
	var f [1]byte
	if !proto.ValidTraceFlags(flags) {
		flags = proto.DefaultTraceFlags
	}
	_, _ = hex.Decode(f[:], []byte(flags))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(f[0]), Remote: true})
	if !sc.IsValid() {
		// The reference accepts an all-zero trace_id; W3C does not.
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}
