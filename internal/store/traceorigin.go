package store

import (
	"context"

	"github.com/tidwall/gjson"

	"github.com/jetrelay/jetrelay/proto"
)

// TraceOrigin is what a delivery record says about the trace its spans
// belong to and the records it points to.
type TraceOrigin struct {
	TraceID string // the event's trace id as admin stored it, "" if none
	Flags   string // proto.InboundTraceFlags of the record
	// SubscriptionID routes the delivery of an ordered subscription
	// (bridge/route.go); it and EventID, read in the same call, go in the
	// work item's headers (queue.SetRoute).
	SubscriptionID string
	EventID        string
	// Raw is the record as read: a bridge whose subscription is under an
	// intake hold reads it further (ParkFields) and writes its wait note
	// over exactly these bytes, or not at all (intake.go).
	Raw string
}

// ParkFields are what a bridge reads of a delivery record, only for a
// subscription under an intake hold, to decide whether it may park it.
type ParkFields struct {
	// Status, AttemptedAt (as stored) and Attempts: whether it was ever
	// sent, and since when it exists.
	Status, AttemptedAt string
	Attempts            int64
	// RequeuedAt is jetrelay_requeued_at as stored: an operator's redrive,
	// fresh evidence no intake hold older than it may keep from the engine.
	RequeuedAt string
}

// ParkFields reads o's record's ParkFields.
func (o TraceOrigin) ParkFields() ParkFields {
	r := gjson.GetMany(o.Raw, "status", "attempted_at", "attempts", "jetrelay_requeued_at")
	return ParkFields{Status: r[0].String(), AttemptedAt: r[1].String(), Attempts: r[2].Int(), RequeuedAt: r[3].String()}
}

// TraceOrigins reads the trace origin of each delivery in one round trip,
// in the order of ids. A missing record gives the zero TraceOrigin: its
// spans simply start a trace of their own.
func (s *Store) TraceOrigins(ctx context.Context, ids []string) ([]TraceOrigin, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = DeliveryKey(id)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]TraceOrigin, len(ids))
	for i := range min(len(vals), len(ids)) {
		if raw, ok := vals[i].(string); ok {
			out[i] = traceOriginOf(raw)
		}
	}
	return out, nil
}

// traceOriginOf reads a delivery record's trace origin. Only these fields
// are read, leniently: a record the engine will quarantine still has its
// publish traced (and the engine checks the ids against the record it
// reads).
func traceOriginOf(raw string) TraceOrigin {
	r := gjson.GetMany(raw, "trace_id", "trace_flags", "traceparent_inbound_valid", "subscription_id", "event_id")
	inbound := r[2].Type == gjson.True
	d := &proto.Delivery{TraceID: r[0].String(), TraceFlags: r[1].String(), TraceparentInboundValid: &inbound}
	return TraceOrigin{TraceID: d.TraceID, Flags: proto.InboundTraceFlags(d), SubscriptionID: r[3].String(), EventID: r[4].String(), Raw: raw}
}
