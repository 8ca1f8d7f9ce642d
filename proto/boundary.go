package proto

import "strings"

// SystemTenant owns admin-plane subscriptions that are not tied to a tenant.
const SystemTenant = "__system__"

// ConcreteOwner reports whether a subscription's tenant_id names a real
// tenant (not null, blank or __system__). Only such subscriptions are bound
// by the ownership boundary.
func ConcreteOwner(tenantID string) bool {
	return strings.TrimSpace(tenantID) != "" && tenantID != SystemTenant
}

// CrossesOwnershipBoundary is the last-mile check upstream added in events
// 0.1.25.23 after admin-only events leaked to tenant subscriptions (#209):
// a subscription owned by a concrete tenant may receive an event only when
// its type starts with budget., reservation. or tenant. AND its category is
// budget, reservation or tenant. The comparison is on the raw strings, and a
// blank or unknown value is blocked (fail closed).
func CrossesOwnershipBoundary(owner, eventType, category string) bool {
	if !ConcreteOwner(owner) {
		return false
	}
	typeOK := strings.HasPrefix(eventType, "budget.") || strings.HasPrefix(eventType, "reservation.") || strings.HasPrefix(eventType, "tenant.")
	switch category {
	case "budget", "reservation", "tenant":
		return !typeOK
	}
	return true
}
