package admin

import (
	"encoding/json"
	"testing"

	"github.com/jetrelay/jetrelay/proto"
)

func TestMatchesScope_FollowsSpecWildcards(t *testing.T) {
	cases := []struct {
		filter, scope string
		want          bool
	}{
		{"", "tenant:a", true},
		{"  ", "", true},
		{"tenant:a", "", false},
		{"*", "", false},
		{"*", "anything", true},
		{"tenant:a/*", "tenant:a/workspace:p", true},
		{"tenant:a/*", "tenant:a/", false}, // children only
		{"tenant:a/*", "tenant:a", false},
		{"tenant:a/*", "tenant:ab/x", false},
		{"tenant:a*", "tenant:ab", true}, // raw prefix, no separator logic
		{"tenant:A/*", "tenant:a/x", false},
		{"tenant:a", "tenant:a", true},
		{"tenant:a", "tenant:a/x", false},
		{"tenant:*/x", "tenant:*/x", true}, // non-trailing * is literal
		{"tenant:*/x", "tenant:b/x", false},
	}
	for _, tc := range cases {
		if got := matchesScope(tc.filter, tc.scope); got != tc.want {
			t.Errorf("matchesScope(%q, %q) = %v, want %v", tc.filter, tc.scope, got, tc.want)
		}
	}
}

func TestDispatchable_AppliesAdminMatchingRules(t *testing.T) {
	budget := Event{EventType: "budget.exhausted", Category: "budget", Scope: "tenant:acme/ws:prod"}
	apiKey := Event{EventType: "api_key.created", Category: "api_key"}
	cases := []struct {
		name  string
		sub   proto.Subscription
		event Event
		want  bool
	}{
		{"listed type", proto.Subscription{EventTypes: []string{"budget.exhausted"}}, budget, true},
		{"other type", proto.Subscription{EventTypes: []string{"budget.created"}}, budget, false},
		{"listed category", proto.Subscription{EventCategories: []string{"budget"}}, budget, true},
		{"type or category suffices", proto.Subscription{EventTypes: []string{"tenant.created"}, EventCategories: []string{"budget"}}, budget, true},
		{"neither type nor category listed takes everything", proto.Subscription{EventTypes: []string{}}, budget, true},
		{"scope filter matches child", proto.Subscription{ScopeFilter: "tenant:acme/*"}, budget, true},
		{"scope filter excludes other tenant", proto.Subscription{ScopeFilter: "tenant:other/*"}, budget, false},
		{"paused is skipped", proto.Subscription{Status: proto.SubscriptionPaused}, budget, false},
		{"disabled is skipped", proto.Subscription{Status: proto.SubscriptionDisabled}, budget, false},
		{"concrete tenant gets budget events", proto.Subscription{TenantID: "acme"}, budget, true},
		{"concrete tenant never gets admin-only events", proto.Subscription{TenantID: "acme"}, apiKey, false},
		{"concrete tenant: admin-only category field is enough to block", proto.Subscription{TenantID: "acme"}, Event{EventType: "budget.created", Category: "system"}, false},
		{"concrete tenant: untyped event blocked", proto.Subscription{TenantID: "acme"}, Event{}, false},
		{"system owner gets admin-only events", proto.Subscription{TenantID: SystemTenant}, apiKey, true},
		{"null owner gets admin-only events", proto.Subscription{}, apiKey, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sub.Status == "" {
				tc.sub.Status = proto.SubscriptionActive
			}
			if got := dispatchable(&tc.sub, tc.event); got != tc.want {
				t.Fatalf("dispatchable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRewriteSubscription_ReordersLikeAdminAndKeepsUnknownFields(t *testing.T) {
	// As the events service leaves a record after its merge: appended
	// last_* fields, an unknown field, a NON_NULL field stored as null.
	raw := `{"subscription_id":"whsub_1","tenant_id":"t","url":"https://x","event_types":["budget.exhausted"],"status":"DISABLED","disable_after_failures":10,"consecutive_failures":10,"created_at":"2026-04-01T12:00:00Z","x_custom":{"a": 1},"name":null,"last_failure_at":"2026-04-01T12:05:00Z","signing_secret":"leak","last_triggered_at":"2026-04-01T12:05:00Z"}`
	got, err := rewriteSubscription([]byte(raw), map[string]json.RawMessage{
		"status": json.RawMessage(`"ACTIVE"`), "updated_at": json.RawMessage(`"2026-04-02T00:00:00Z"`), "consecutive_failures": json.RawMessage(`0`),
	})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"subscription_id":"whsub_1","tenant_id":"t","url":"https://x","event_types":["budget.exhausted"],"status":"ACTIVE","disable_after_failures":10,"consecutive_failures":0,"created_at":"2026-04-01T12:00:00Z","updated_at":"2026-04-02T00:00:00Z","last_triggered_at":"2026-04-01T12:05:00Z","last_failure_at":"2026-04-01T12:05:00Z","x_custom":{"a":1}}`
	if string(got) != want {
		t.Fatalf("\n got: %s\nwant: %s", got, want)
	}
}

func TestRewriteSubscription_RejectsMalformedRecords(t *testing.T) {
	for _, raw := range []string{``, `null`, `[1]`, `{"a":`, `{"a":1} x`, `{"a":1}{}`} {
		if _, err := rewriteSubscription([]byte(raw), nil); err == nil {
			t.Errorf("accepted %q", raw)
		}
	}
}
