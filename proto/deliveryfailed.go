package proto

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// Constant parts of the system.webhook_delivery_failed event upstream emits
// since 0.1.25.21 when a delivery has used up its retries.
const (
	deliveryFailedEventType     = "system.webhook_delivery_failed"
	deliveryFailedCategory      = "system"
	deliveryFailedCorrelationID = "webhook_delivery_failed:"
	deliveryFailedTask          = "delivery-failed:"
)

// DeliveryFailedEvent is the system.webhook_delivery_failed event, saved
// (never fanned out by the relay itself) under tenant __system__ once per
// delivery that failed for good after its sends. Dashboards and alerts read
// it from events:__system__. Its JSON is written here byte for byte as
// upstream 0.1.25.24's Jackson writes it.
type DeliveryFailedEvent struct {
	SubscriptionID string
	TenantID       string // the subscription's tenant; empty is written as null
	DeliveryID     string
	EventID        string // the delivered event's id; empty is written as null
	EventType      string // the delivery's event type; empty omits it
	Attempts       int    // sends made, the last one included
	LastStatus     int    // status of the last answer; 0 (no answer) omits it
	Error          string // the delivery's error_message; empty omits it
	RequestID      string // the delivered event's request_id; empty omits it
	TraceID        string // the delivery's trace_id (else the event's); empty omits it
	Timestamp      time.Time
}

// ID is the event's own id, derived as upstream derives it from its outbox
// task id ("delivery-failed:<subscription>:<delivery>"): "evt_" and the first
// 8 bytes of its SHA-256 in hex. Saving the same failure twice therefore
// rewrites one record instead of adding a second.
func (e DeliveryFailedEvent) ID() string {
	sum := sha256.Sum256([]byte(deliveryFailedTask + e.SubscriptionID + ":" + e.DeliveryID))
	return eventIDPrefix + hex.EncodeToString(sum[:8])
}

// CorrelationID is webhook_delivery_failed:<subscription_id>:<delivery_id>.
func (e DeliveryFailedEvent) CorrelationID() string {
	return deliveryFailedCorrelationID + e.SubscriptionID + ":" + e.DeliveryID
}

// JSON is the event:{id} record in the Event field order. data keeps
// upstream's LinkedHashMap order (component, message, severity, details);
// details writes a null tenant or event id as null, as a Java map does, and
// leaves out what upstream puts only when known.
func (e DeliveryFailedEvent) JSON() []byte {
	b := appendRelayEventHead(make([]byte, 0, 768), e.ID(), deliveryFailedEventType, deliveryFailedCategory, e.Timestamp, SystemTenant)
	b = append(b, `,"data":{"component":"webhook_dispatcher","message":`...)
	b = AppendJSONString(b, "Webhook delivery failed after "+strconv.Itoa(e.Attempts)+" attempts: subscription "+e.SubscriptionID)
	b = append(b, `,"severity":"warning","details":{"subscription_id":`...)
	b = AppendJSONString(b, e.SubscriptionID)
	b = append(b, `,"tenant_id":`...)
	b = appendStringOrNull(b, e.TenantID)
	b = append(b, `,"delivery_id":`...)
	b = AppendJSONString(b, e.DeliveryID)
	b = append(b, `,"event_id":`...)
	b = appendStringOrNull(b, e.EventID)
	if e.EventType != "" {
		b = append(b, `,"event_type":`...)
		b = AppendJSONString(b, e.EventType)
	}
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(e.Attempts), 10)
	if e.LastStatus > 0 {
		b = append(b, `,"last_response_status":`...)
		b = strconv.AppendInt(b, int64(e.LastStatus), 10)
	}
	if e.Error != "" {
		b = append(b, `,"error":`...)
		b = AppendJSONString(b, e.Error)
	}
	b = append(b, `}}`...)

	return appendRelayEventTail(b, e.CorrelationID(), e.RequestID, e.TraceID)
}
