package bridge

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/telemetry"
)

// tracerName is the instrumentation scope of the bridge's spans.
const tracerName = "github.com/jetrelay/jetrelay/bridge"

// origins is what the delivery records of ids say about their trace,
// subscription and event: the engine reads a delivery whose work item names
// them (queue.SetRoute) in one round trip instead of two, and tracing and
// ordered lines (route.go) use the same read. The move that took the ids
// read them with it (known); ids it did not (a recovered batch, a lone id
// a wait moved on a client that cannot pipeline it) are read here, in one
// MGET per batch. When that read fails it is nil: the ids go out without,
// and the engine reads their records one after the other.
func (b *Bridge) origins(ctx context.Context, ids []string, known map[string]store.TraceOrigin) []store.TraceOrigin {
	if len(ids) == 0 {
		return nil
	}
	out := make([]store.TraceOrigin, len(ids))
	for i, id := range ids {
		o, ok := known[id]
		if !ok {
			return b.readOrigins(ctx, ids)
		}
		out[i] = o
	}
	return out
}

// readOrigins reads the origins of ids, nil when the read fails.
func (b *Bridge) readOrigins(ctx context.Context, ids []string) []store.TraceOrigin {
	origins, err := b.store.TraceOrigins(ctx, ids)
	if err != nil {
		return nil
	}
	return origins
}

// traceParents returns, per id, the context a publish span of that
// delivery starts from: its event's trace (telemetry.DeliveryParent), read
// from the delivery records (origins). It is nil when tracing is off, so
// an untraced bridge costs nothing, and when the read failed: a span in a
// trace of its own would pull the engine's attempts out of the event's
// trace, while without one the engine finds that trace itself.
func (b *Bridge) traceParents(ids []string, origins []store.TraceOrigin) []context.Context {
	if b.tracer == nil || origins == nil {
		return nil
	}
	out := make([]context.Context, len(ids))
	for i, id := range ids {
		out[i] = telemetry.DeliveryParent(context.Background(), id, origins[i].TraceID, origins[i].Flags)
	}
	return out
}

// startPublish starts the PRODUCER span of one work item and puts its
// context in the message's headers, under the lowercase names the engine
// (and any non-Go consumer) reads. extra attributes describe the item
// further (startPromotion).
func (b *Bridge) startPublish(parent context.Context, msg *nats.Msg, id string, extra ...attribute.KeyValue) trace.Span {
	ctx, span := b.tracer.Start(parent, "send "+b.cfg.Queue.Subject, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		msgID := msg.Header.Get(jetstream.MsgIDHeader)
		if msgID == "" {
			msgID = id
		}
		span.SetAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.operation.name", "send"),
			attribute.String("messaging.destination.name", b.cfg.Queue.Subject),
			attribute.String("messaging.message.id", msgID),
			attribute.String("jetrelay.delivery_id", id),
		)
		span.SetAttributes(extra...)
	}
	propagation.TraceContext{}.Inject(ctx, telemetry.NATSCarrier(msg.Header))
	return span
}

func endPublish(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
