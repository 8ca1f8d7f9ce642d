package proto

import (
	"encoding/json"
	"testing"
	"time"
)

func contractDisabledEvent(t *testing.T) DisabledEvent {
	t.Helper()
	ts, err := ParseInstant("2026-04-01T12:07:41.502117Z")
	if err != nil {
		t.Fatal(err)
	}
	return DisabledEvent{
		EventID:        "evt_8c1d2e3f4a5b6c7d",
		TenantID:       "acme-corp",
		SubscriptionID: "whsub_3f9a2c1b7d4e8f60",
		DeliveryID:     "del_66e435de3e733abc",
		PreviousStatus: "ACTIVE",
		TraceID:        "4bf92f3577b34da6a3ce929d0e0e4736",
		Timestamp:      ts,
	}
}

func TestDisabledEvent_ReproducesContractExampleByteForByte(t *testing.T) {
	got := string(contractDisabledEvent(t).JSON())
	if got != exampleWebhookDisabledEvent {
		t.Errorf("JSON =\n%s\nwant\n%s", got, exampleWebhookDisabledEvent)
	}
}

func TestDisabledEvent_OptionalFields(t *testing.T) {
	base := contractDisabledEvent(t)
	tests := []struct {
		name   string
		mutate func(*DisabledEvent)
		want   string
	}{
		{"no trace id", func(e *DisabledEvent) { e.TraceID = "" },
			`{"event_id":"evt_8c1d2e3f4a5b6c7d","event_type":"webhook.disabled","category":"webhook","timestamp":"2026-04-01T12:07:41.502117Z","tenant_id":"acme-corp","actor":{"type":"system"},"source":"cycles-events","data":{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","previous_status":"ACTIVE","new_status":"DISABLED","changed_fields":[],"disable_reason":"consecutive_failures_exceeded_threshold"},"correlation_id":"webhook_auto_disable:whsub_3f9a2c1b7d4e8f60:del_66e435de3e733abc"}`},
		{"request id between correlation and trace", func(e *DisabledEvent) { e.RequestID = "2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b" },
			`{"event_id":"evt_8c1d2e3f4a5b6c7d","event_type":"webhook.disabled","category":"webhook","timestamp":"2026-04-01T12:07:41.502117Z","tenant_id":"acme-corp","actor":{"type":"system"},"source":"cycles-events","data":{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","previous_status":"ACTIVE","new_status":"DISABLED","changed_fields":[],"disable_reason":"consecutive_failures_exceeded_threshold"},"correlation_id":"webhook_auto_disable:whsub_3f9a2c1b7d4e8f60:del_66e435de3e733abc","request_id":"2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`},
		{"no tenant and no previous status", func(e *DisabledEvent) { e.TenantID, e.PreviousStatus, e.TraceID = "", "", "" },
			`{"event_id":"evt_8c1d2e3f4a5b6c7d","event_type":"webhook.disabled","category":"webhook","timestamp":"2026-04-01T12:07:41.502117Z","tenant_id":null,"actor":{"type":"system"},"source":"cycles-events","data":{"subscription_id":"whsub_3f9a2c1b7d4e8f60","new_status":"DISABLED","changed_fields":[],"disable_reason":"consecutive_failures_exceeded_threshold"},"correlation_id":"webhook_auto_disable:whsub_3f9a2c1b7d4e8f60:del_66e435de3e733abc"}`},
		{"whole-second timestamp in another zone", func(e *DisabledEvent) {
			e.Timestamp = time.Date(2026, 4, 1, 14, 7, 41, 0, time.FixedZone("CEST", 2*3600))
			e.TraceID = ""
		},
			`{"event_id":"evt_8c1d2e3f4a5b6c7d","event_type":"webhook.disabled","category":"webhook","timestamp":"2026-04-01T12:07:41Z","tenant_id":"acme-corp","actor":{"type":"system"},"source":"cycles-events","data":{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","previous_status":"ACTIVE","new_status":"DISABLED","changed_fields":[],"disable_reason":"consecutive_failures_exceeded_threshold"},"correlation_id":"webhook_auto_disable:whsub_3f9a2c1b7d4e8f60:del_66e435de3e733abc"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := base
			tt.mutate(&e)
			if got := string(e.JSON()); got != tt.want {
				t.Errorf("JSON =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestDisabledEvent_EscapesHostileIDsAndStaysReadable(t *testing.T) {
	e := contractDisabledEvent(t)
	e.SubscriptionID = "whsub_\"},\"x\":\"\n"
	e.TenantID = "acme</script>\u2028"
	raw := e.JSON()
	ev, err := ParseEvent(raw)
	if err != nil {
		t.Fatalf("own output unreadable: %v\n%s", err, raw)
	}
	if ev.TenantID != e.TenantID || ev.CorrelationID != e.CorrelationID() {
		t.Errorf("round trip changed ids: %+v", ev)
	}
	var data map[string]any
	if err := json.Unmarshal(ev.Data, &data); err != nil || data["subscription_id"] != e.SubscriptionID || len(data) != 6 {
		t.Errorf("data = %v (%v), want the hostile id kept in one field", data, err)
	}
}

func TestDisabledEvent_CorrelationIDNamesSubscriptionAndDelivery(t *testing.T) {
	e := DisabledEvent{SubscriptionID: "whsub_1", DeliveryID: "del_2"}
	if got, want := e.CorrelationID(), "webhook_auto_disable:whsub_1:del_2"; got != want {
		t.Errorf("CorrelationID = %s, want %s", got, want)
	}
}
