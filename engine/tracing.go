package engine

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/internal/telemetry"
	"github.com/jetrelay/jetrelay/proto"
)

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "github.com/jetrelay/jetrelay/engine"

// Span event names: what happened to a delivery during an attempt span.
const (
	eventDeferred       = "jetrelay.deferred"
	eventRetryScheduled = "jetrelay.retry_scheduled"
	eventDelivered      = "jetrelay.delivered"
	eventFailed         = "jetrelay.failed"
)

// extractTrace returns ctx carrying the span context a producer put in the
// work item's headers, if any, and whether the item was republished
// (markRepublished).
func extractTrace(ctx context.Context, m jetstream.Msg) context.Context {
	h := m.Headers()
	if len(h) == 0 {
		return ctx
	}
	return markRepublished(propagation.TraceContext{}.Extract(ctx, telemetry.NATSCarrier(h)), m)
}

// deliveryParent is the parent of an attempt span: the producer's context
// from the work item's headers when there is one (the bridge's publish
// span), otherwise the delivery's own remote context (telemetry.
// DeliveryParent), so that the admin request that emitted the event and
// every attempt share one trace.
func deliveryParent(ctx context.Context, d *proto.Delivery) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return telemetry.DeliveryParent(ctx, d.DeliveryID, d.TraceID, proto.InboundTraceFlags(d))
}

// startAttempt starts the CONSUMER span of one handling of a work item.
// A recording span also links to the delivery's previous handling
// (linkAttempt).
func (e *Engine) startAttempt(ctx context.Context, md *jetstream.MsgMetadata, d *proto.Delivery) (context.Context, trace.Span) {
	actx, span := e.tracer.Start(deliveryParent(ctx, d), "process "+e.cfg.Queue.Subject, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.operation.name", "process"),
			attribute.String("messaging.destination.name", e.cfg.Queue.Subject),
			attribute.String("messaging.consumer.group.name", md.Consumer),
			attribute.Int64("messaging.nats.delivery_count", int64(md.NumDelivered)),
			attribute.String("jetrelay.delivery_id", d.DeliveryID),
			attribute.String("jetrelay.subscription_id", d.SubscriptionID),
			attribute.String("jetrelay.event_id", d.EventID),
			attribute.Int("jetrelay.attempt", d.Attempts+1),
		)
		return e.linkAttempt(ctx, actx, span, md, d)
	}
	return actx, span
}

// startSend starts the CLIENT span of one send. Only the URL's scheme and
// host are recorded: a URL's path, query or userinfo may hold credentials.
func (e *Engine) startSend(ctx context.Context, scheme, rawURL string) (context.Context, trace.Span) {
	name := "send " + scheme
	if scheme == "http" || scheme == "https" {
		name = "POST"
	}
	ctx, span := e.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("transport", scheme), attribute.String("url.scheme", scheme))
		if host := urlHost(rawURL); host != "" {
			span.SetAttributes(attribute.String("server.address", host))
		}
		if name == "POST" {
			span.SetAttributes(attribute.String("http.request.method", "POST"))
		}
	}
	return ctx, span
}

// endSend records the send's result on its span and ends it.
func endSend(span trace.Span, o outcome) {
	if span.IsRecording() {
		if o.res.StatusCode != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", o.res.StatusCode))
		}
		span.SetAttributes(attribute.String("jetrelay.send.outcome", o.sendOutcome()))
		if !o.accepted() {
			span.SetAttributes(attribute.String("error.type", o.reason()))
			span.SetStatus(codes.Error, o.reason())
		}
	}
	span.End()
}

// outboundTrace is proto.OutboundTrace with the send span's ids when there
// is a real send span in the delivery's trace: the receiver that continues
// the outbound traceparent then becomes the send span's child. With tracing
// off (a no-op span carries its parent's ids) it is proto.OutboundTrace as is.
func outboundTrace(eventTraceID string, d *proto.Delivery, parent, send trace.SpanContext) (traceID, traceparent string) {
	traceID, traceparent = proto.OutboundTrace(eventTraceID, d)
	if !send.IsValid() || send.SpanID() == parent.SpanID() {
		return traceID, traceparent
	}
	spanTrace := send.TraceID().String()
	switch {
	case spanTrace == traceID:
	case !proto.ValidTraceID(eventTraceID):
		// The contract asks for a fresh trace id: the span's is one.
		traceID = spanTrace
	default:
		// The span lives in another trace (a producer's context that
		// disagrees with the event): the event's trace_id wins on the wire.
		return traceID, traceparent
	}
	return traceID, proto.BuildTraceparent(traceID, send.SpanID().String(), proto.InboundTraceFlags(d))
}

// spanEvent notes on the current attempt span what happened to the
// delivery and why; nothing is built when the span is not recording.
func spanEvent(ctx context.Context, name, reason string, extra ...attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := append([]attribute.KeyValue{attribute.String("jetrelay.reason", reason)}, extra...)
	span.AddEvent(name, trace.WithAttributes(attrs...))
	switch name {
	case eventFailed:
		span.SetStatus(codes.Error, reason)
		settled(span)
	case eventDelivered:
		settled(span)
	}
}

func untilAttr(t time.Time) attribute.KeyValue {
	return attribute.String("jetrelay.until", t.UTC().Format(time.RFC3339Nano))
}

// urlHost is the host (without port or userinfo) of a URL, "" when it has
// none that can be read.
func urlHost(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if strings.HasPrefix(rest, "[") {
		if i := strings.IndexByte(rest, ']'); i >= 0 {
			return rest[1:i]
		}
		return ""
	}
	host, _, _ := strings.Cut(rest, ":")
	return host
}

// startWaiting starts, while the handling's attempt span records, the
// PRODUCER span of a wake-up or held copy of the delivery and puts its
// context in msg's headers: the handling that the wake-up (or the release
// of the held copy) brings is its child, as a handling of a work item the
// bridge published is the child of that publish. Like the bridge's, the
// span's parent is the delivery's own remote context, so every handling
// stays in the delivery's trace. until is zero for a held copy. It returns
// nil when there is nothing to record.
func (e *Engine) startWaiting(h *handling, msg *nats.Msg, until time.Time) trace.Span {
	if !trace.SpanFromContext(h.ctx).IsRecording() {
		return nil
	}
	d := h.delivery()
	parent := telemetry.DeliveryParent(context.WithoutCancel(h.ctx), d.DeliveryID, d.TraceID, proto.InboundTraceFlags(d))
	ctx, span := e.tracer.Start(parent, "send "+e.cfg.Queue.Subject, trace.WithSpanKind(trace.SpanKindProducer))
	span.SetAttributes(
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "send"),
		attribute.String("messaging.destination.name", msg.Subject),
		attribute.String("jetrelay.delivery_id", d.DeliveryID),
		attribute.Bool("jetrelay.deferred", true),
	)
	if !until.IsZero() {
		span.SetAttributes(untilAttr(until), attribute.String("jetrelay.due", until.UTC().Format(time.RFC3339Nano)))
	}
	propagation.TraceContext{}.Inject(ctx, telemetry.NATSCarrier(msg.Header))
	return span
}

// endWaiting ends a span startWaiting started (nil is fine).
func endWaiting(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
