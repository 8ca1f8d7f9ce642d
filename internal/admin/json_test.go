package admin

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// The expected strings below are copied from the contract
// (cycles-events-contract.md §3.1–§3.3), which reproduced them with
// Jackson: they are admin's bytes, not ours.

func mustInstant(t *testing.T, s string) time.Time {
	t.Helper()
	ts, err := proto.ParseInstant(s)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestSubscriptionJSON_MatchesAdminCreateExampleByteForByte(t *testing.T) {
	s := Subscription{
		ID:              "whsub_3f9a2c1b7d4e8f60",
		TenantID:        "acme-corp",
		Name:            "PagerDuty budget alerts",
		URL:             "https://hooks.example.com/cycles",
		EventTypes:      []string{"budget.exhausted", "reservation.denied"},
		EventCategories: []string{"tenant"},
		ScopeFilter:     "tenant:acme-corp/*",
		Headers:         map[string]string{"Authorization": "Bearer tok_abc"},
		CreatedAt:       mustInstant(t, "2026-04-01T12:00:00.123456Z"),
	}
	const want = `{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","name":"PagerDuty budget alerts","url":"https://hooks.example.com/cycles","event_types":["budget.exhausted","reservation.denied"],"event_categories":["tenant"],"scope_filter":"tenant:acme-corp/*","headers":{"Authorization":"Bearer tok_abc"},"status":"ACTIVE","retry_policy":{"max_retries":5,"initial_delay_ms":1000,"backoff_multiplier":2.0,"max_delay_ms":60000},"disable_after_failures":10,"consecutive_failures":0,"created_at":"2026-04-01T12:00:00.123456Z"}`
	if err := s.Validate(); err != nil {
		t.Fatalf("contract example rejected: %v", err)
	}
	if got := string(s.JSON()); got != want {
		t.Fatalf("subscription JSON differs from admin's\n got: %s\nwant: %s", got, want)
	}
}

func TestSubscriptionJSON_NullPolicy(t *testing.T) {
	created := mustInstant(t, "2026-04-01T12:00:00Z")
	mult := 1.5
	maxRetries := 0
	cases := []struct {
		name string
		sub  Subscription
		want string
	}{
		{
			name: "system owner, nil event types written as null, optional fields left out",
			sub:  Subscription{ID: "whsub_a", URL: "http://x", EventCategories: []string{"api_key"}, CreatedAt: created},
			want: `{"subscription_id":"whsub_a","tenant_id":"__system__","url":"http://x","event_types":null,"event_categories":["api_key"],"status":"ACTIVE","retry_policy":{"max_retries":5,"initial_delay_ms":1000,"backoff_multiplier":2.0,"max_delay_ms":60000},"disable_after_failures":10,"consecutive_failures":0,"created_at":"2026-04-01T12:00:00Z"}`,
		},
		{
			name: "partial retry policy filled with defaults, multiplier as a Java double, metadata verbatim",
			sub: Subscription{
				ID: "whsub_b", TenantID: "t1", Description: "d", URL: "https://x/y?a=<b>&c", EventTypes: []string{},
				EventCategories: []string{"budget"}, Status: proto.SubscriptionPaused, DisableAfterFailures: 3, ConsecutiveFailures: 2,
				RetryPolicy: &proto.RetryPolicy{MaxRetries: &maxRetries, BackoffMultiplier: &mult},
				Headers:     map[string]string{"X-B": "2", "X-A": "1"}, CreatedAt: created,
				Metadata: json.RawMessage(`{"n":1.50,"g":null}`),
			},
			want: `{"subscription_id":"whsub_b","tenant_id":"t1","description":"d","url":"https://x/y?a=<b>&c","event_types":[],"event_categories":["budget"],"headers":{"X-A":"1","X-B":"2"},"status":"PAUSED","retry_policy":{"max_retries":0,"initial_delay_ms":1000,"backoff_multiplier":1.5,"max_delay_ms":60000},"disable_after_failures":3,"consecutive_failures":2,"created_at":"2026-04-01T12:00:00Z","metadata":{"n":1.50,"g":null}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.sub.JSON()); got != tc.want {
				t.Fatalf("\n got: %s\nwant: %s", got, tc.want)
			}
			if _, err := proto.ParseSubscription(tc.sub.JSON()); err != nil {
				t.Fatalf("record is not readable: %v", err)
			}
		})
	}
}

func TestEventJSON_MatchesContractExamplesByteForByte(t *testing.T) {
	cases := []struct {
		name  string
		event Event
		want  string
	}{
		{
			name: "runtime budget.exhausted",
			event: Event{
				EventID: "evt_5d7e9f1a3b5c7d9e", EventType: "budget.exhausted", Category: "budget",
				Timestamp: mustInstant(t, "2026-04-01T12:00:00.118Z"), TenantID: "acme-corp",
				Scope: "tenant:acme-corp/workspace:prod", Actor: &proto.Actor{Type: "api_key", KeyID: "key_7f3a"},
				Source:    "cycles-server",
				Data:      json.RawMessage(`{"ledger_id":"led_01hx","scope":"tenant:acme-corp/workspace:prod","unit":"TOKENS","allocated":10000,"remaining":0,"spent":10000}`),
				RequestID: "2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			},
			want: `{"event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","category":"budget","timestamp":"2026-04-01T12:00:00.118Z","tenant_id":"acme-corp","scope":"tenant:acme-corp/workspace:prod","actor":{"type":"api_key","key_id":"key_7f3a"},"source":"cycles-server","data":{"ledger_id":"led_01hx","scope":"tenant:acme-corp/workspace:prod","unit":"TOKENS","allocated":10000,"remaining":0,"spent":10000},"request_id":"2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`,
		},
		{
			name: "admin webhook.created built by WebhookCreatedEvent",
			event: func() Event {
				e := WebhookCreatedEvent(Subscription{ID: "whsub_3f9a2c1b7d4e8f60", TenantID: "acme-corp"},
					"2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b", "4bf92f3577b34da6a3ce929d0e0e4736")
				e.EventID = "evt_1a2b3c4d5e6f7a8b"
				e.Timestamp = mustInstant(t, "2026-04-01T12:00:00.123456Z")
				return e
			}(),
			want: `{"event_id":"evt_1a2b3c4d5e6f7a8b","event_type":"webhook.created","category":"webhook","timestamp":"2026-04-01T12:00:00.123456Z","tenant_id":"acme-corp","actor":{"type":"admin"},"source":"cycles-admin","data":{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","new_status":"ACTIVE","changed_fields":[]},"correlation_id":"webhook_create:whsub_3f9a2c1b7d4e8f60","request_id":"2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`,
		},
		{
			name:  "missing always-written fields are literal nulls, strings escaped as Jackson does",
			event: Event{EventType: "tenant.created", Scope: "a\"b\\c\u0001/<&>\u2028é", Metadata: json.RawMessage(`{}`)},
			want:  `{"event_id":null,"event_type":"tenant.created","category":null,"timestamp":null,"tenant_id":null,"scope":"a\"b\\c\u0001/<&>` + "\u2028" + `é","source":null,"metadata":{}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.event.JSON()); got != tc.want {
				t.Fatalf("\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestDeliveryJSON_MatchesAdminLiveDispatchExampleByteForByte(t *testing.T) {
	inbound := false
	d := Delivery{
		DeliveryID: DeliveryID("evt_5d7e9f1a3b5c7d9e", "whsub_3f9a2c1b7d4e8f60"), SubscriptionID: "whsub_3f9a2c1b7d4e8f60",
		EventID: "evt_5d7e9f1a3b5c7d9e", EventType: "budget.exhausted",
		AttemptedAt: mustInstant(t, "2026-04-01T12:00:00.130211Z"),
		TraceID:     "4bf92f3577b34da6a3ce929d0e0e4736", TraceFlags: "01", TraceparentInboundValid: &inbound,
	}
	const want = `{"delivery_id":"del_66e435de3e733abc","subscription_id":"whsub_3f9a2c1b7d4e8f60","event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","status":"PENDING","attempted_at":"2026-04-01T12:00:00.130211Z","attempts":0,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","trace_flags":"01","traceparent_inbound_valid":false}`
	if got := string(d.JSON()); got != want {
		t.Fatalf("\n got: %s\nwant: %s", got, want)
	}
}

func TestDeliveryJSON_SeededRetryStateKeepsAdminOrder(t *testing.T) {
	status, ms, msg := 503, int64(87), "HTTP 503"
	next := mustInstant(t, "2026-04-01T12:00:01.224Z")
	d := Delivery{
		DeliveryID: "del_1", SubscriptionID: "whsub_1", EventID: "evt_1", Status: proto.DeliveryRetrying,
		AttemptedAt: mustInstant(t, "2026-04-01T12:00:00Z"), Attempts: 1, ResponseStatus: &status, ResponseTimeMs: &ms,
		ErrorMessage: &msg, NextRetryAt: &next,
	}
	const want = `{"delivery_id":"del_1","subscription_id":"whsub_1","event_id":"evt_1","status":"RETRYING","attempted_at":"2026-04-01T12:00:00Z","attempts":1,"response_status":503,"response_time_ms":87,"error_message":"HTTP 503","next_retry_at":"2026-04-01T12:00:01.224Z"}`
	if got := string(d.JSON()); got != want {
		t.Fatalf("\n got: %s\nwant: %s", got, want)
	}
	if _, err := proto.ParseDelivery(d.JSON()); err != nil {
		t.Fatalf("record is not readable: %v", err)
	}
}

func TestDeliveryID_IsAdminsUUIDv3Prefix(t *testing.T) {
	if got := DeliveryID("evt_5d7e9f1a3b5c7d9e", "whsub_3f9a2c1b7d4e8f60"); got != "del_66e435de3e733abc" {
		t.Fatalf("DeliveryID = %s, want del_66e435de3e733abc (contract §5.1 vector)", got)
	}
	if DeliveryID("evt_a", "whsub_b") == DeliveryID("evt_a", "whsub_c") {
		t.Fatal("different subscriptions got the same delivery id")
	}
}

func TestMintedIDs_HaveAdminsShape(t *testing.T) {
	cases := []struct {
		name string
		mint func() string
		re   *regexp.Regexp
	}{
		{"subscription id is whsub_ + UUIDv4 prefix", NewSubscriptionID, regexp.MustCompile(`^whsub_[0-9a-f]{12}4[0-9a-f]{3}$`)},
		{"random delivery id is del_ + UUIDv4 prefix", NewRandomDeliveryID, regexp.MustCompile(`^del_[0-9a-f]{12}4[0-9a-f]{3}$`)},
		{"signing secret is whsec_ + 43 base64url chars", NewSigningSecret, regexp.MustCompile(`^whsec_[A-Za-z0-9_-]{43}$`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.mint(), tc.mint()
			if !tc.re.MatchString(a) {
				t.Fatalf("%q does not match %s", a, tc.re)
			}
			if a == b {
				t.Fatalf("two mints returned the same value %q", a)
			}
		})
	}
}

func TestSubscriptionValidate_RejectsWhatAdminRejects(t *testing.T) {
	valid := Subscription{URL: "https://example.com/hook", EventTypes: []string{"budget.exhausted"}}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid subscription rejected: %v", err)
	}
	i := func(v int) *int { return &v }
	i64 := func(v int64) *int64 { return &v }
	f := func(v float64) *float64 { return &v }
	long := func(n int) string {
		b := make([]rune, n)
		for i := range b {
			b[i] = 'é'
		}
		return string(b)
	}
	cases := []struct {
		name   string
		mutate func(*Subscription)
	}{
		{"missing url", func(s *Subscription) { s.URL = "" }},
		{"non-http scheme", func(s *Subscription) { s.URL = "ftp://example.com" }},
		{"url without host", func(s *Subscription) { s.URL = "https:///x" }},
		{"url over 2048", func(s *Subscription) { s.URL = "https://e.com/" + long(2048) }},
		{"name over 256", func(s *Subscription) { s.Name = long(257) }},
		{"description over 1024", func(s *Subscription) { s.Description = long(1025) }},
		{"no types and no categories", func(s *Subscription) { s.EventTypes = nil }},
		{"empty event type", func(s *Subscription) { s.EventTypes = []string{""} }},
		{"admin-only type for a concrete tenant", func(s *Subscription) { s.TenantID = "acme"; s.EventTypes = []string{"api_key.created"} }},
		{"admin-only category for a concrete tenant", func(s *Subscription) { s.TenantID = "acme"; s.EventCategories = []string{"webhook"} }},
		{"CR/LF in a header value", func(s *Subscription) { s.Headers = map[string]string{"X-A": "a\r\nX-Evil: 1"} }},
		{"header name that is not a token", func(s *Subscription) { s.Headers = map[string]string{"X A": "1"} }},
		{"unknown status", func(s *Subscription) { s.Status = "ENABLED" }},
		{"max_retries 11", func(s *Subscription) { s.RetryPolicy = &proto.RetryPolicy{MaxRetries: i(11)} }},
		{"initial_delay_ms 99", func(s *Subscription) { s.RetryPolicy = &proto.RetryPolicy{InitialDelayMs: i64(99)} }},
		{"backoff_multiplier 0.5", func(s *Subscription) { s.RetryPolicy = &proto.RetryPolicy{BackoffMultiplier: f(0.5)} }},
		{"max_delay_ms 3600001", func(s *Subscription) { s.RetryPolicy = &proto.RetryPolicy{MaxDelayMs: i64(3600001)} }},
		{"metadata not an object", func(s *Subscription) { s.Metadata = json.RawMessage(`[1]`) }},
		{"id with a newline", func(s *Subscription) { s.ID = "whsub_a\nb" }},
		{"tenant with a space", func(s *Subscription) { s.TenantID = "acme corp" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := valid
			tc.mutate(&s)
			if err := s.Validate(); err == nil {
				t.Fatalf("accepted %+v", s)
			}
		})
	}
	system := valid
	system.EventTypes = []string{"api_key.created", "webhook.created"}
	if err := system.Validate(); err != nil {
		t.Fatalf("__system__ owner may subscribe to admin-only types, got %v", err)
	}
}

func TestEventValidate_RejectsUnstorableEvents(t *testing.T) {
	cases := []struct {
		name  string
		event Event
	}{
		{"no type", Event{}},
		{"type with a newline", Event{EventType: "budget.exhausted\n"}},
		{"event id with a space", Event{EventType: "budget.exhausted", EventID: "evt 1"}},
		{"tenant with CR", Event{EventType: "budget.exhausted", TenantID: "a\rb"}},
		{"correlation id with LF", Event{EventType: "budget.exhausted", CorrelationID: "c\nd"}},
		{"data not an object", Event{EventType: "budget.exhausted", Data: json.RawMessage(`"x"`)}},
		{"data malformed", Event{EventType: "budget.exhausted", Data: json.RawMessage(`{"a":}`)}},
		{"metadata not an object", Event{EventType: "budget.exhausted", Metadata: json.RawMessage(`[]`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.event.Validate(); err == nil {
				t.Fatalf("accepted %+v", tc.event)
			}
		})
	}
	ok := Event{EventType: "budget.exhausted", TraceID: "NOT-A-TRACE-ID", CorrelationID: " ", Data: json.RawMessage(" {}")}
	if err := ok.Validate(); err != nil {
		t.Fatalf("odd but storable event rejected: %v", err)
	}
}
