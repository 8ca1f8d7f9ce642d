package proto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	// The one import outside the standard library: see doc.go.
	gojson "github.com/goccy/go-json"
)

// Instant is a timestamp field of a Cycles record. It reads the ISO-8601
// strings Jackson writes; a JSON null leaves a *Instant field nil.
type Instant struct{ time.Time }

// UnmarshalJSON implements json.Unmarshaler.
func (i *Instant) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && bytes.IndexByte(b[1:n-1], '\\') < 0 {
		// The usual form: a plain string with nothing to unescape. The
		// decoder has already checked that b is a valid JSON value.
		s = string(b[1 : n-1])
	} else if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("proto: instant must be a string, got %s", truncateForError(b))
	}
	t, err := ParseInstant(s)
	if err != nil {
		return err
	}
	i.Time = t
	return nil
}

// MarshalJSON implements json.Marshaler with the Java Instant form.
func (i Instant) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 32), '"')
	b = AppendInstant(b, i.Time)
	return append(b, '"'), nil
}

// Event is an event:{id} record. Category and Actor.Type are open strings:
// admin emits values (admin_on_behalf_of, new categories) that a closed enum
// would reject, and the record must still be delivered verbatim.
type Event struct {
	EventID       string          `json:"event_id"`
	EventType     string          `json:"event_type"`
	Category      string          `json:"category"`
	Timestamp     *Instant        `json:"timestamp"`
	TenantID      string          `json:"tenant_id"`
	Scope         string          `json:"scope,omitempty"`
	Actor         *Actor          `json:"actor,omitempty"`
	Source        string          `json:"source"`
	Data          json.RawMessage `json:"data,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	RequestID     string          `json:"request_id,omitempty"`
	TraceID       string          `json:"trace_id,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

// Actor says who caused an event.
type Actor struct {
	Type     string `json:"type,omitempty"`
	KeyID    string `json:"key_id,omitempty"`
	SourceIP string `json:"source_ip,omitempty"`
}

// Delivery is a delivery:{id} record: one event on its way to one subscription.
type Delivery struct {
	DeliveryID              string         `json:"delivery_id"`
	SubscriptionID          string         `json:"subscription_id"`
	EventID                 string         `json:"event_id"`
	EventType               string         `json:"event_type"`
	Status                  DeliveryStatus `json:"status"`
	AttemptedAt             *Instant       `json:"attempted_at"`
	CompletedAt             *Instant       `json:"completed_at"`
	Attempts                int            `json:"attempts"`
	ResponseStatus          *int           `json:"response_status"`
	ResponseTimeMs          *int64         `json:"response_time_ms"`
	ErrorMessage            *string        `json:"error_message"`
	NextRetryAt             *Instant       `json:"next_retry_at"`
	TraceID                 string         `json:"trace_id,omitempty"`
	TraceFlags              string         `json:"trace_flags,omitempty"`
	TraceparentInboundValid *bool          `json:"traceparent_inbound_valid,omitempty"`
	// Waiting is jetrelay's own note of why a non-final delivery is not
	// being sent now: "breaker_open", "subscription_busy",
	// "subscription_paused", "subscription_disabled" (held until the
	// subscription is ACTIVE again). Null once it is sent or final. Admin
	// ignores fields it does not know.
	Waiting *string `json:"jetrelay_waiting,omitempty"`
	// RequeuedAt is when an operator last requeued the delivery
	// (`jetrelay deliveries requeue`). A redrive is fresh evidence about
	// the endpoint: an engine whose breaker for the subscription opened
	// before it closes it. Admin ignores fields it does not know.
	RequeuedAt *Instant `json:"jetrelay_requeued_at,omitempty"`
}

// Subscription is a webhook:{id} record as admin writes it.
type Subscription struct {
	SubscriptionID       string             `json:"subscription_id"`
	TenantID             string             `json:"tenant_id"`
	Name                 string             `json:"name,omitempty"`
	Description          string             `json:"description,omitempty"`
	URL                  string             `json:"url"`
	EventTypes           []string           `json:"event_types"`
	EventCategories      []string           `json:"event_categories,omitempty"`
	ScopeFilter          string             `json:"scope_filter,omitempty"`
	Thresholds           json.RawMessage    `json:"thresholds,omitempty"`
	Headers              map[string]string  `json:"headers,omitempty"`
	Status               SubscriptionStatus `json:"status"`
	RetryPolicy          *RetryPolicy       `json:"retry_policy,omitempty"`
	DisableAfterFailures *int               `json:"disable_after_failures"`
	ConsecutiveFailures  int                `json:"consecutive_failures"`
	CreatedAt            *Instant           `json:"created_at"`
	UpdatedAt            *Instant           `json:"updated_at,omitempty"`
	LastTriggeredAt      *Instant           `json:"last_triggered_at,omitempty"`
	LastSuccessAt        *Instant           `json:"last_success_at,omitempty"`
	LastFailureAt        *Instant           `json:"last_failure_at,omitempty"`
	Metadata             json.RawMessage    `json:"metadata,omitempty"`
}

// DefaultDisableAfterFailures is the auto-disable threshold used when a
// subscription does not set disable_after_failures.
const DefaultDisableAfterFailures = 10

// DisableAfter is the number of consecutive exhausted deliveries that
// auto-disables the subscription (disable_after_failures, default 10).
func (s *Subscription) DisableAfter() int {
	if s.DisableAfterFailures == nil {
		return DefaultDisableAfterFailures
	}
	return *s.DisableAfterFailures
}

// Policy is the subscription's retry policy with defaults applied.
func (s *Subscription) Policy() RetryPolicy {
	if s.RetryPolicy == nil {
		return RetryPolicy{}
	}
	return *s.RetryPolicy
}

// ParseEvent reads an event:{id} record. Unknown fields are ignored.
func ParseEvent(raw []byte) (*Event, error) {
	var e Event
	if err := unmarshalRecord(raw, &e); err != nil {
		return nil, fmt.Errorf("proto: malformed event record: %w", err)
	}
	return &e, nil
}

// ParseDelivery reads a delivery:{id} record. A status outside the four the
// contract defines makes the record unreadable, as it does for the reference.
func ParseDelivery(raw []byte) (*Delivery, error) {
	var d Delivery
	if err := unmarshalRecord(raw, &d); err != nil {
		return nil, fmt.Errorf("proto: malformed delivery record: %w", err)
	}
	if !d.Status.Known() {
		return nil, fmt.Errorf("proto: malformed delivery record: unknown status %q", string(d.Status))
	}
	return &d, nil
}

// ParseSubscription reads a webhook:{id} record. An unknown status (or none)
// is kept as is: it is simply not ACTIVE.
func ParseSubscription(raw []byte) (*Subscription, error) {
	var s Subscription
	if err := unmarshalRecord(raw, &s); err != nil {
		return nil, fmt.Errorf("proto: malformed subscription record: %w", err)
	}
	return &s, nil
}

// unmarshalRecord decodes a record that must be a JSON object. encoding/json
// would accept a bare null and leave a zero record, which would then look
// like a real one with every field missing.
func unmarshalRecord(raw []byte, v any) error {
	if err := checkObject(raw); err != nil {
		return err
	}
	return gojson.Unmarshal(raw, v)
}

func checkObject(raw []byte) error {
	if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("record is not a JSON object")
	}
	return nil
}

func truncateForError(b []byte) string {
	const max = 64
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
