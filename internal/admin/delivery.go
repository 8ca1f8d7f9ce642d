package admin

import (
	"errors"
	"fmt"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// Delivery is a delivery:{id} record as admin's WebhookDelivery serializes it
// (contract §3.3): the pointer fields and empty strings are NON_NULL and left
// out when unset. Admin creates deliveries PENDING with attempts 0; the other
// fields let tests seed records mid-retry or stale.
type Delivery struct {
	// DeliveryID "" means DeliveryID(EventID, SubscriptionID) for Enqueue
	// and a random id for EnqueueRuntimeStyle.
	DeliveryID     string
	SubscriptionID string
	EventID        string
	EventType      string
	// Status defaults to PENDING.
	Status proto.DeliveryStatus
	// AttemptedAt zero means now; it is also the deliveries:{sub} score and
	// the events service's staleness baseline.
	AttemptedAt    time.Time
	CompletedAt    *time.Time
	Attempts       int
	ResponseStatus *int
	ResponseTimeMs *int64
	ErrorMessage   *string
	NextRetryAt    *time.Time
	TraceID        string
	TraceFlags     string
	// TraceparentInboundValid nil leaves the field out (off-request emits).
	TraceparentInboundValid *bool
}

// Validate checks the ids a delivery needs and that they are key-safe.
func (d Delivery) Validate() error {
	var errs []error
	for _, f := range []struct{ what, v string }{
		{"subscription_id", d.SubscriptionID}, {"event_id", d.EventID},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s is required", f.what))
		} else if err := checkKeyPart(f.what, f.v); err != nil {
			errs = append(errs, err)
		}
	}
	if d.DeliveryID != "" {
		if err := checkKeyPart("delivery_id", d.DeliveryID); err != nil {
			errs = append(errs, err)
		}
	}
	if d.Status != "" && !d.Status.Known() {
		errs = append(errs, fmt.Errorf("status %q is not PENDING, RETRYING, SUCCESS or FAILED", string(d.Status)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("admin: invalid delivery: %w", err)
	}
	return nil
}

// JSON is the delivery:{id} record exactly as admin serializes it.
// An empty Status is written as PENDING; an empty DeliveryID or zero
// AttemptedAt as null (the writers fill both first).
func (d Delivery) JSON() []byte {
	o := newObject(384)
	o.str("delivery_id", d.DeliveryID)
	o.str("subscription_id", d.SubscriptionID)
	o.str("event_id", d.EventID)
	o.optStr("event_type", d.EventType)
	o.str("status", string(d.status()))
	o.instant("attempted_at", d.AttemptedAt)
	o.optInstant("completed_at", d.CompletedAt)
	o.int("attempts", int64(d.Attempts))
	if d.ResponseStatus != nil {
		o.int("response_status", int64(*d.ResponseStatus))
	}
	if d.ResponseTimeMs != nil {
		o.int("response_time_ms", *d.ResponseTimeMs)
	}
	if d.ErrorMessage != nil {
		o.key("error_message")
		o.b = proto.AppendJSONString(o.b, *d.ErrorMessage)
	}
	o.optInstant("next_retry_at", d.NextRetryAt)
	o.optStr("trace_id", d.TraceID)
	o.optStr("trace_flags", d.TraceFlags)
	if d.TraceparentInboundValid != nil {
		o.bool("traceparent_inbound_valid", *d.TraceparentInboundValid)
	}
	return o.bytes()
}

func (d Delivery) status() proto.DeliveryStatus {
	if d.Status == "" {
		return proto.DeliveryPending
	}
	return d.Status
}
