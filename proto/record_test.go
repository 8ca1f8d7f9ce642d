package proto

import (
	"strings"
	"testing"
	"time"
)

func TestParseSubscription_ReadsContractExample(t *testing.T) {
	s, err := ParseSubscription([]byte(exampleSubscription))
	if err != nil {
		t.Fatal(err)
	}
	if s.SubscriptionID != "whsub_3f9a2c1b7d4e8f60" || s.TenantID != "acme-corp" || s.URL != "https://hooks.example.com/cycles" {
		t.Errorf("identity fields: %+v", s)
	}
	if len(s.EventTypes) != 2 || s.EventTypes[1] != "reservation.denied" || len(s.EventCategories) != 1 || s.ScopeFilter != "tenant:acme-corp/*" {
		t.Errorf("selectors: %v %v %q", s.EventTypes, s.EventCategories, s.ScopeFilter)
	}
	if s.Headers["Authorization"] != "Bearer tok_abc" || s.Status != SubscriptionActive || s.DisableAfter() != 10 || s.ConsecutiveFailures != 0 {
		t.Errorf("state: %+v", s)
	}
	p := s.Policy()
	if p.Retries() != 5 || p.Delay(1) != time.Second || p.Delay(10) != time.Minute {
		t.Errorf("retry policy: %+v", p)
	}
	if s.CreatedAt == nil || FormatInstant(s.CreatedAt.Time) != "2026-04-01T12:00:00.123456Z" || s.LastSuccessAt != nil {
		t.Errorf("timestamps: created %v, last success %v", s.CreatedAt, s.LastSuccessAt)
	}
}

func TestParseSubscription_ReadsSuccessMergedRecord(t *testing.T) {
	merged := strings.TrimSuffix(exampleSubscription, "}") +
		`,"last_triggered_at":"2026-04-01T12:05:10.532114Z","last_success_at":"2026-04-01T12:05:10.532114Z"}`
	s, err := ParseSubscription([]byte(merged))
	if err != nil {
		t.Fatal(err)
	}
	if s.LastSuccessAt == nil || FormatInstant(s.LastSuccessAt.Time) != "2026-04-01T12:05:10.532114Z" {
		t.Errorf("last_success_at = %v", s.LastSuccessAt)
	}
}

func TestParseSubscription_KeepsUnknownStatusAndNullDefaults(t *testing.T) {
	s, err := ParseSubscription([]byte(`{"subscription_id":"whsub_1","tenant_id":null,"url":"https://x","event_types":null,"status":"ARCHIVED","disable_after_failures":null,"consecutive_failures":3,"created_at":null,"future_field":{"a":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status.Known() || s.Status == SubscriptionActive {
		t.Errorf("status %q should be kept and not be ACTIVE", s.Status)
	}
	if s.DisableAfter() != DefaultDisableAfterFailures || s.TenantID != "" || s.CreatedAt != nil || s.ConsecutiveFailures != 3 {
		t.Errorf("nulls: %+v", s)
	}
}

func TestParseEvent_ReadsContractExamples(t *testing.T) {
	tests := []struct {
		name, raw, eventType, category, actorType, source, traceID, requestID string
	}{
		{"runtime budget.exhausted", exampleBudgetExhaustedEvent, "budget.exhausted", "budget", "api_key", "cycles-server", "4bf92f3577b34da6a3ce929d0e0e4736", "2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b"},
		{"admin webhook.created", exampleWebhookCreatedEvent, "webhook.created", "webhook", "admin", "cycles-admin", "4bf92f3577b34da6a3ce929d0e0e4736", "2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b"},
		{"events webhook.disabled", exampleWebhookDisabledEvent, "webhook.disabled", "webhook", "system", "cycles-events", "4bf92f3577b34da6a3ce929d0e0e4736", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseEvent([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if e.EventType != tt.eventType || e.Category != tt.category || e.Source != tt.source || e.TenantID != "acme-corp" {
				t.Errorf("fields: %+v", e)
			}
			if e.Actor == nil || e.Actor.Type != tt.actorType {
				t.Errorf("actor = %+v, want type %s", e.Actor, tt.actorType)
			}
			if e.TraceID != tt.traceID || e.RequestID != tt.requestID || e.Timestamp == nil || len(e.Data) == 0 {
				t.Errorf("trace %q request %q timestamp %v data %s", e.TraceID, e.RequestID, e.Timestamp, e.Data)
			}
		})
	}
}

func TestParseEvent_AcceptsOpenCategoryAndActorTypeAndUnknownFields(t *testing.T) {
	raw := `{"event_id":"evt_1","event_type":"budget.created","category":"brand_new_category","timestamp":"2026-04-01T12:00:00Z","tenant_id":"t","actor":{"type":"admin_on_behalf_of","key_id":"k","extra":true},"source":"cycles-admin","data":{"g":null,"n":1.50},"schema_version":2,"nested":{"x":[1,2]}}`
	e, err := ParseEvent([]byte(raw))
	if err != nil {
		t.Fatalf("an event with open values was refused (the reference bug §8 #13): %v", err)
	}
	if e.Category != "brand_new_category" || e.Actor.Type != "admin_on_behalf_of" {
		t.Errorf("open strings changed: %q %q", e.Category, e.Actor.Type)
	}
	if string(e.Data) != `{"g":null,"n":1.50}` {
		t.Errorf("data not kept verbatim: %s", e.Data)
	}
}

func TestParseDelivery_ReadsContractExamples(t *testing.T) {
	pending, err := ParseDelivery([]byte(examplePendingDelivery))
	if err != nil {
		t.Fatal(err)
	}
	if pending.Status != DeliveryPending || pending.Attempts != 0 || pending.TraceFlags != "01" ||
		pending.TraceparentInboundValid == nil || *pending.TraceparentInboundValid || pending.CompletedAt != nil {
		t.Errorf("pending delivery: %+v", pending)
	}
	retrying, err := ParseDelivery([]byte(exampleRetryingDelivery))
	if err != nil {
		t.Fatal(err)
	}
	if retrying.Status != DeliveryRetrying || retrying.Attempts != 1 || retrying.ResponseStatus == nil || *retrying.ResponseStatus != 503 ||
		retrying.ResponseTimeMs == nil || *retrying.ResponseTimeMs != 87 || retrying.ErrorMessage == nil || *retrying.ErrorMessage != "HTTP 503" {
		t.Errorf("retrying delivery: %+v", retrying)
	}
	if retrying.NextRetryAt == nil || FormatInstant(retrying.NextRetryAt.Time) != "2026-04-01T12:00:01.224Z" || retrying.CompletedAt != nil {
		t.Errorf("retrying timestamps: next %v completed %v", retrying.NextRetryAt, retrying.CompletedAt)
	}
	if _, tp := OutboundTrace(retrying.TraceID, retrying); !strings.HasSuffix(tp, "-01") {
		t.Errorf("traceparent %s should default to sampled", tp)
	}
}

func TestParseDelivery_RejectsUnknownOrMissingStatus(t *testing.T) {
	for _, raw := range []string{
		`{"delivery_id":"del_1","status":"CANCELLED"}`,
		`{"delivery_id":"del_1","status":"pending"}`,
		`{"delivery_id":"del_1"}`,
		`{"delivery_id":"del_1","status":null}`,
	} {
		if _, err := ParseDelivery([]byte(raw)); err == nil || !strings.Contains(err.Error(), "status") {
			t.Errorf("ParseDelivery(%s) err = %v, want an unknown-status error", raw, err)
		}
	}
}

func TestParseRecords_RejectWrongTypesWithErrors(t *testing.T) {
	parsers := map[string]func([]byte) error{
		"event":        func(b []byte) error { _, err := ParseEvent(b); return err },
		"delivery":     func(b []byte) error { _, err := ParseDelivery(b); return err },
		"subscription": func(b []byte) error { _, err := ParseSubscription(b); return err },
	}
	tests := []struct {
		name, kind, raw string
	}{
		{"not JSON", "event", `{"event_id":`},
		{"JSON null", "event", `null`},
		{"empty", "delivery", ``},
		{"array", "subscription", `[{"subscription_id":"x"}]`},
		{"string", "delivery", `"PENDING"`},
		{"numeric timestamp", "event", `{"event_id":"e","timestamp":1775044800}`},
		{"malformed timestamp", "event", `{"event_id":"e","timestamp":"yesterday"}`},
		{"actor as string", "event", `{"event_id":"e","actor":"admin"}`},
		{"attempts as string", "delivery", `{"delivery_id":"d","status":"PENDING","attempts":"1"}`},
		{"response_status as bool", "delivery", `{"delivery_id":"d","status":"RETRYING","response_status":true}`},
		{"trace_flags as number", "delivery", `{"delivery_id":"d","status":"PENDING","trace_flags":1}`},
		{"headers as array", "subscription", `{"subscription_id":"s","headers":["a"]}`},
		{"header value as number", "subscription", `{"subscription_id":"s","headers":{"a":1}}`},
		{"retry policy multiplier as string", "subscription", `{"subscription_id":"s","retry_policy":{"backoff_multiplier":"2"}}`},
		{"max_retries overflowing int", "subscription", `{"subscription_id":"s","retry_policy":{"max_retries":1e400}}`},
		{"event_types as string", "subscription", `{"subscription_id":"s","event_types":"budget.exhausted"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := parsers[tt.kind]([]byte(tt.raw))
			if err == nil {
				t.Fatalf("Parse %s accepted %s", tt.kind, tt.raw)
			}
			if !strings.HasPrefix(err.Error(), "proto: ") {
				t.Errorf("error %q does not name its package", err)
			}
		})
	}
}
