package proto

import "time"

// Constant parts of the webhook.disabled event the reference emits on
// auto-disable (§3.2, §6.5).
const (
	disabledEventType     = "webhook.disabled"
	disabledCategory      = "webhook"
	disabledReason        = "consecutive_failures_exceeded_threshold"
	disabledCorrelationID = "webhook_auto_disable:"
)

// DisabledEvent is the webhook.disabled event saved (never fanned out) when
// a subscription is auto-disabled. Its JSON is written here, byte for byte
// as the reference writes it, rather than through encoding/json: the stored
// record is what admin lists and what a later replay signs.
type DisabledEvent struct {
	EventID        string
	TenantID       string // subscription's tenant; empty is written as null
	SubscriptionID string
	DeliveryID     string // the delivery whose exhaustion tipped the threshold
	PreviousStatus string // status before the flip; empty omits it
	TraceID        string // triggering delivery's trace_id; empty omits it
	RequestID      string // originating request_id; empty omits it
	Timestamp      time.Time
}

// CorrelationID links the event to the delivery that caused it:
// webhook_auto_disable:<subscription_id>:<delivery_id>. The reference also
// indexes the event under events:correlation:<this>.
func (e DisabledEvent) CorrelationID() string {
	return disabledCorrelationID + e.SubscriptionID + ":" + e.DeliveryID
}

// JSON is the event:{id} record, in the Event field order shared by every
// Cycles service. data follows the reference's NON_NULL map: keys whose
// value is unknown (an empty tenant id or previous status) are left out,
// while the top-level tenant_id, always written, becomes null. request_id,
// absent in v0.1.25.12, is written when known as later upstream versions do.
func (e DisabledEvent) JSON() []byte {
	b := appendRelayEventHead(make([]byte, 0, 512), e.EventID, disabledEventType, disabledCategory, e.Timestamp, e.TenantID)
	b = append(b, `,"data":{"subscription_id":`...)
	b = AppendJSONString(b, e.SubscriptionID)
	if e.TenantID != "" {
		b = append(b, `,"tenant_id":`...)
		b = AppendJSONString(b, e.TenantID)
	}
	if e.PreviousStatus != "" {
		b = append(b, `,"previous_status":`...)
		b = AppendJSONString(b, e.PreviousStatus)
	}
	b = append(b, `,"new_status":`...)
	b = AppendJSONString(b, string(SubscriptionDisabled))
	b = append(b, `,"changed_fields":[],"disable_reason":`...)
	b = AppendJSONString(b, disabledReason)
	b = append(b, '}')

	return appendRelayEventTail(b, e.CorrelationID(), e.RequestID, e.TraceID)
}
