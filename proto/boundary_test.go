package proto

import "testing"

func TestCrossesOwnershipBoundary_BlocksAdminOnlyEventsForTenantOwners(t *testing.T) {
	cases := []struct {
		owner, eventType, category string
		blocked                    bool
	}{
		{"acme", "budget.exhausted", "budget", false},
		{"acme", "reservation.denied", "reservation", false},
		{"acme", "tenant.closed_via_tenant_cascade", "tenant", false},
		{"acme", "api_key.revoked", "api_key", true},
		{"acme", "webhook.disabled", "webhook", true},
		{"acme", "budget.exhausted", "system", true}, // category disagrees with the type
		{"acme", "system.high_latency", "budget", true},
		{"acme", "", "", true},
		{"acme", "budget.exhausted", "", true}, // blank category fails closed
		{"__system__", "api_key.revoked", "api_key", false},
		{"", "webhook.disabled", "webhook", false},
		{"  ", "policy.created", "policy", false},
	}
	for _, c := range cases {
		if got := CrossesOwnershipBoundary(c.owner, c.eventType, c.category); got != c.blocked {
			t.Errorf("owner %q, %q/%q: blocked=%v, want %v", c.owner, c.eventType, c.category, got, c.blocked)
		}
	}
}
