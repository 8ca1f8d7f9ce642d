package admin

import (
	"slices"
	"strings"

	"github.com/jetrelay/jetrelay/proto"
)

// The matching rules of admin's live dispatch (contract §5.2 step 3). Admin's
// replay uses the same ones; cycles-server uses them without the ownership
// boundary.

// dispatchable reports whether admin's live dispatch enqueues e for sub.
func dispatchable(sub *proto.Subscription, e Event) bool {
	return sub.Status == proto.SubscriptionActive &&
		matchesEventType(sub, e.EventType) &&
		matchesScope(sub.ScopeFilter, e.Scope) &&
		!crossesOwnershipBoundary(sub.TenantID, e)
}

// matchesEventType: the type is listed, or its category is, or the
// subscription lists neither (then it takes everything).
func matchesEventType(sub *proto.Subscription, eventType string) bool {
	if len(sub.EventTypes) == 0 && len(sub.EventCategories) == 0 {
		return true
	}
	return len(sub.EventTypes) > 0 && slices.Contains(sub.EventTypes, eventType) ||
		len(sub.EventCategories) > 0 && slices.Contains(sub.EventCategories, categoryOf(eventType))
}

// matchesScope applies the spec's wildcard syntax: no filter matches
// everything, an unscoped event matches no filter, "*" matches any scope, a
// trailing '*' matches strict descendants of the prefix (case-sensitive),
// anything else must be equal ('*' elsewhere is literal).
func matchesScope(filter, scope string) bool {
	if isBlank(filter) {
		return true
	}
	if isBlank(scope) {
		return false
	}
	if filter == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(filter, "*"); ok {
		return strings.HasPrefix(scope, prefix) && len(scope) > len(prefix)
	}
	return scope == filter
}

// crossesOwnershipBoundary is admin's fail-closed #209 check: a subscription
// owned by a concrete tenant only ever receives budget, reservation and
// tenant events, and never an event with neither type nor category.
func crossesOwnershipBoundary(owner string, e Event) bool {
	if !concreteOwner(owner) {
		return false
	}
	if e.EventType == "" && e.Category == "" {
		return true
	}
	return e.EventType != "" && !tenantAccessible(categoryOf(e.EventType)) ||
		e.Category != "" && !tenantAccessible(e.Category)
}

func concreteOwner(owner string) bool { return owner != "" && owner != SystemTenant }

// tenantAccessible is admin's EventCategory.isTenantAccessible.
func tenantAccessible(category string) bool {
	return category == "budget" || category == "reservation" || category == "tenant"
}

// isBlank is Java's String.isBlank for a possibly-null string.
func isBlank(s string) bool { return strings.TrimSpace(s) == "" }
