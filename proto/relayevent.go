package proto

import "time"

// eventSource is the source of the events the relay itself saves, as the
// reference writes it.
const eventSource = "cycles-events"

// appendRelayEventHead writes the fields before "data" of an event the relay
// saves (webhook.disabled, system.webhook_delivery_failed), in the Event
// field order every Cycles service shares: the actor is always system, and
// an empty tenant is written as null.
func appendRelayEventHead(b []byte, eventID, eventType, category string, ts time.Time, tenantID string) []byte {
	b = append(b, `{"event_id":`...)
	b = AppendJSONString(b, eventID)
	b = append(b, `,"event_type":`...)
	b = AppendJSONString(b, eventType)
	b = append(b, `,"category":`...)
	b = AppendJSONString(b, category)
	b = append(b, `,"timestamp":"`...)
	b = AppendInstant(b, ts)
	b = append(b, `","tenant_id":`...)
	b = appendStringOrNull(b, tenantID)
	b = append(b, `,"actor":{"type":"system"},"source":`...)
	return AppendJSONString(b, eventSource)
}

// appendRelayEventTail writes the fields after "data" and closes the event:
// correlation_id always, request_id and trace_id only when known (NON_NULL).
func appendRelayEventTail(b []byte, correlationID, requestID, traceID string) []byte {
	b = append(b, `,"correlation_id":`...)
	b = AppendJSONString(b, correlationID)
	if requestID != "" {
		b = append(b, `,"request_id":`...)
		b = AppendJSONString(b, requestID)
	}
	if traceID != "" {
		b = append(b, `,"trace_id":`...)
		b = AppendJSONString(b, traceID)
	}
	return append(b, '}')
}

// appendStringOrNull writes s as a JSON string, or null when it is empty.
func appendStringOrNull(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return AppendJSONString(b, s)
}
