package proto

import "testing"

func TestCrossesOwnershipBoundary_BlocksAdminOnlyEventsForTenantOwners(t *testing.T) {
	cases := []struct {
		owner, eventType, category string
		blocked                    bool
	}{
		{"acme", "budget.exhausted", "budget", false},
		{"acme", "reservation.denied", "reservation", false},
		{"acme", "budget.closed_via_tenant_cascade", "budget", false},
		{"acme", "api_key.revoked", "api_key", true},
		{"acme", "webhook.disabled", "webhook", true},
		{"acme", "budget.exhausted", "system", true},    // an admin-only category blocks
		{"acme", "system.high_latency", "budget", true}, // an admin-only type blocks
		{"acme", "", "", true},                          // unclassifiable fails closed
		{"acme", "billing.invoiced", "", true},          // unknown type, no category
		{"acme", "billing.invoiced", "billing", true},   // unknown type and category
		{"acme", "budget.exhausted", "", false},         // the type classifies it (upstream delivers)
		{"acme", "budget.exhausted", "billing", false},  // an unknown category does not block a known type
		{"acme", "budget.new_kind", "budget", false},    // the category classifies an unknown type
		{"  ", "policy.created", "policy", true},        // a whitespace-only owner is concrete
		{"__system__", "api_key.revoked", "api_key", false},
		{"", "webhook.disabled", "webhook", false},
	}
	for _, c := range cases {
		if got := CrossesOwnershipBoundary(c.owner, c.eventType, c.category); got != c.blocked {
			t.Errorf("owner %q, %q/%q: blocked=%v, want %v", c.owner, c.eventType, c.category, got, c.blocked)
		}
	}
}
