package engine

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/proto"
)

// A delivery may be handled many times: JetStream redelivers it after a
// nak, and a put-off comes back as a new work item when its wake-up (a
// message schedule) fires or its held copy is released. Each handling has its own attempt
// span; while tracing records, each one from the second on links to the one
// before, so a trace viewer shows the chain. The previous span's context
// lives in Redis (store.TraceLinkKey) between two handlings, because the
// next one may run on another replica. Nothing of this runs when the span
// is not recording: no Redis command, no allocation.

// linkTimeout bounds each read or write of a trace link. A link is worth
// less than the delivery it describes: a slow Redis costs a handling at
// most this much more, and a failure only loses the link.
const linkTimeout = time.Second

// linkAttr marks the link of an attempt span to the handling before it.
var linkAttr = attribute.String("jetrelay.link", "previous_attempt")

// republished marks, in the context of a handling, a work item the bridge
// published again for a delivery it had published before (a fired wake-up,
// a released held copy, a re-enqueue). Only items that carry a producer's
// trace context are marked (see extractTrace).
type republished struct{}

// markRepublished returns ctx marked as republished when the work item
// carried a producer's trace context and its Nats-Msg-Id is not the plain
// delivery id (queue.RequeueMsgID, or none at all for a fired wake-up).
func markRepublished(ctx context.Context, m jetstream.Msg) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() || m.Headers().Get(jetstream.MsgIDHeader) == string(m.Data()) {
		return ctx
	}
	return context.WithValue(ctx, republished{}, true)
}

// mayFollow reports whether a handling may have had one before it. Only a
// first delivery of a fresh work item from a tracing bridge, for a delivery
// never attempted, is known not to, and skips the read.
func mayFollow(ctx context.Context, md *jetstream.MsgMetadata, d *proto.Delivery) bool {
	switch {
	case md.NumDelivered > 1, d.Attempts > 0, d.Status == proto.DeliveryRetrying:
		return true
	case !trace.SpanContextFromContext(ctx).IsValid():
		// No producer context: a promotion cannot be told from a first
		// publish.
		return true
	}
	return ctx.Value(republished{}) != nil
}

// attemptSpan is a recording attempt span that knows how its handling
// ended. Ending it without a final outcome (spanEvent's delivered or
// failed) remembers its context for the next handling; ending it with one
// removes the context it found from the handling before.
type attemptSpan struct {
	trace.Span
	e          *Engine
	deliveryID string
	found      bool // a previous handling's context was stored
	final      bool // the delivery reached SUCCESS or FAILED in this handling
}

// linkAttempt turns the recording attempt span of a handling into an
// attemptSpan, in actx, the context the span was started in, and links it
// to the delivery's previous handling when there may have been one. ctx is
// the handling's context before the span (extractTrace's).
func (e *Engine) linkAttempt(ctx, actx context.Context, span trace.Span, md *jetstream.MsgMetadata, d *proto.Delivery) (context.Context, trace.Span) {
	a := &attemptSpan{Span: span, e: e, deliveryID: d.DeliveryID}
	if mayFollow(ctx, md, d) {
		a.linkPrevious(actx)
	}
	return trace.ContextWithSpan(actx, a), a
}

// linkPrevious adds a link to the previous handling's span, if one is
// remembered.
func (a *attemptSpan) linkPrevious(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, linkTimeout)
	defer cancel()
	v, err := a.e.store.LastAttempt(ctx, a.deliveryID)
	if err != nil {
		a.e.log.Debug("previous attempt span not read; no link", "delivery_id", a.deliveryID, "err", err)
		return
	}
	if v == "" {
		return
	}
	a.found = true
	tp, err := proto.ParseTraceparent(v)
	if err != nil {
		return
	}
	a.AddLink(trace.Link{
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tp.TraceID, SpanID: tp.SpanID, TraceFlags: trace.TraceFlags(tp.Flags), Remote: true,
		}),
		Attributes: []attribute.KeyValue{linkAttr},
	})
}

// End ends the span, then leaves the next handling what it needs to link
// to this one, or clears it once the delivery is final.
func (a *attemptSpan) End(opts ...trace.SpanEndOption) {
	a.Span.End(opts...)
	if a.final && !a.found {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), linkTimeout)
	defer cancel()
	var err error
	if a.final {
		err = a.e.store.ForgetAttempt(ctx, a.deliveryID)
	} else {
		sc := a.SpanContext()
		tp := proto.BuildTraceparent(sc.TraceID().String(), sc.SpanID().String(), sc.TraceFlags().String())
		err = a.e.store.RememberAttempt(ctx, a.deliveryID, tp, a.e.cfg.MaxDeliveryAge+time.Hour)
	}
	if err != nil {
		a.e.log.Debug("attempt span context not saved for the next attempt's link", "delivery_id", a.deliveryID, "err", err)
	}
}

// settled notes on the handling's attempt span that the delivery is final.
func settled(span trace.Span) {
	if a, ok := span.(*attemptSpan); ok {
		a.final = true
	}
}
