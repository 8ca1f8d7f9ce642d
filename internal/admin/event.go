package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// Event is an event:{id} record as admin (and cycles-server) writes it
// (contract §3.2). Empty always-written fields become literal nulls in JSON;
// SaveEvent and Emit fill EventID, Timestamp, Category and Source first.
type Event struct {
	// EventID "" is minted by SaveEvent (proto.NewEventID).
	EventID string
	// EventType is required (e.g. budget.exhausted).
	EventType string
	// Category "" is filled from EventType's prefix, as admin takes it from
	// the type enum.
	Category string
	// Timestamp zero means now.
	Timestamp time.Time
	// TenantID is always written; "" is a literal null and indexes the
	// event under events:null, as Java's string concatenation does.
	TenantID string
	// Scope, Actor, CorrelationID, RequestID, TraceID, Data and Metadata
	// are left out of the record when empty.
	Scope string
	Actor *proto.Actor
	// Source "" means "cycles-admin".
	Source        string
	Data          json.RawMessage
	CorrelationID string
	RequestID     string
	TraceID       string
	Metadata      json.RawMessage
}

// Validate checks that e can be stored: a type, key-safe ids, and data and
// metadata that are JSON objects. trace_id is not checked, so tests can
// store the malformed ones the events service must tolerate.
func (e Event) Validate() error {
	var errs []error
	if e.EventType == "" {
		errs = append(errs, errors.New("event_type is required"))
	} else if err := checkSelector("event_type", e.EventType); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []struct {
		what, v string
		skip    bool
	}{
		{"event_id", e.EventID, e.EventID == ""},
		{"tenant_id", e.TenantID, e.TenantID == ""},
		// A blank correlation id is stored but, as admin does, not indexed.
		{"correlation_id", e.CorrelationID, isBlank(e.CorrelationID)},
	} {
		if !f.skip {
			if err := checkKeyPart(f.what, f.v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(e.Data) > 0 && !isJSONObject(e.Data) {
		errs = append(errs, errors.New("data must be a JSON object"))
	}
	if len(e.Metadata) > 0 && !isJSONObject(e.Metadata) {
		errs = append(errs, errors.New("metadata must be a JSON object"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("admin: invalid event: %w", err)
	}
	return nil
}

// JSON is the event:{id} record in the field order admin, cycles-server and
// the events service share, with Data and Metadata written verbatim.
func (e Event) JSON() []byte {
	o := newObject(512 + len(e.Data) + len(e.Metadata))
	o.str("event_id", e.EventID)
	o.str("event_type", e.EventType)
	o.str("category", e.Category)
	o.instant("timestamp", e.Timestamp)
	o.str("tenant_id", e.TenantID)
	o.optStr("scope", e.Scope)
	if a := e.Actor; a != nil {
		o.key("actor")
		ao := newObject(64)
		ao.optStr("type", a.Type)
		ao.optStr("key_id", a.KeyID)
		ao.optStr("source_ip", a.SourceIP)
		o.b = append(o.b, ao.bytes()...)
	}
	o.str("source", e.Source)
	o.optRaw("data", e.Data)
	o.optStr("correlation_id", e.CorrelationID)
	o.optStr("request_id", e.RequestID)
	o.optStr("trace_id", e.TraceID)
	o.optRaw("metadata", e.Metadata)
	return o.bytes()
}

// WebhookCreatedEvent is the webhook.created lifecycle event admin's
// WebhookAdminController.create emits for s (contract §3.2); requestID and
// traceID are the creating request's. CreateSubscription does not emit it,
// so that demos and benchmarks see only the traffic they ask for; pass it to
// Emit to reproduce admin fully.
func WebhookCreatedEvent(s Subscription, requestID, traceID string) Event {
	data := newObject(160)
	data.str("subscription_id", s.ID)
	data.str("tenant_id", s.owner())
	data.str("new_status", string(s.status()))
	data.strings("changed_fields", []string{})
	return Event{
		EventType:     "webhook.created",
		Category:      "webhook",
		TenantID:      s.owner(),
		Actor:         &proto.Actor{Type: "admin"},
		Source:        sourceAdmin,
		Data:          data.bytes(),
		CorrelationID: "webhook_create:" + s.ID,
		RequestID:     requestID,
		TraceID:       traceID,
	}
}

const sourceAdmin = "cycles-admin"

// categoryOf is the category of an event type: the part before the first
// dot, which is how every one of admin's 51 types is named.
func categoryOf(eventType string) string {
	c, _, _ := strings.Cut(eventType, ".")
	if c == eventType {
		return ""
	}
	return c
}
