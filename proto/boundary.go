package proto

// SystemTenant owns admin-plane subscriptions that are not tied to a tenant.
const SystemTenant = "__system__"

// ConcreteOwner reports whether a subscription's tenant_id names a real
// tenant. As upstream, only a null (empty) owner and __system__ are exempt
// from the ownership boundary; a whitespace-only owner is concrete.
func ConcreteOwner(tenantID string) bool {
	return tenantID != "" && tenantID != SystemTenant
}

// CrossesOwnershipBoundary is the last-mile check upstream added in events
// 0.1.25.23 after admin-only events leaked to tenant subscriptions (#209),
// as upstream 0.1.25.24's WebhookOwnershipBoundary decides it: a
// subscription owned by a concrete tenant may not receive an event whose
// type is a known admin-only type, whose category is a known admin-only
// category, or which neither its type nor its category classifies (both
// unknown or blank: fail closed). So a known budget.* type without a
// category is delivered, and an unknown type is judged by its category.
func CrossesOwnershipBoundary(owner, eventType, category string) bool {
	if !ConcreteOwner(owner) {
		return false
	}
	typeCategory := EventTypeCategory(eventType)
	typeAdmin := typeCategory != "" && !TenantAccessibleCategory(typeCategory)
	categoryAdmin := KnownCategory(category) && !TenantAccessibleCategory(category)
	unclassifiable := typeCategory == "" && !KnownCategory(category)
	return typeAdmin || categoryAdmin || unclassifiable
}
