package proto

import "strings"

// eventTypes is the EventType vocabulary of upstream 0.1.25.24, by category:
// the 47 types of the protocol page (the 42 of 0.1.25.12, contract §6.9,
// plus the webhook lifecycle types added in 0.1.25.18) and the four
// *_via_tenant_cascade fan-out types added in 0.1.25.21, admin's 51.
var eventTypes = func() map[string]bool {
	m := make(map[string]bool)
	for category, names := range map[string]string{
		"budget":      "created updated funded debited reset reset_spent debt_repaid frozen unfrozen closed threshold_crossed exhausted over_limit_entered over_limit_exited debt_incurred burn_rate_anomaly closed_via_tenant_cascade",
		"reservation": "denied denial_rate_spike expired expiry_rate_spike commit_overage released_via_tenant_cascade",
		"tenant":      "created updated suspended reactivated closed settings_changed",
		"api_key":     "created revoked expired permissions_changed auth_failed auth_failure_rate_spike revoked_via_tenant_cascade",
		"policy":      "created updated deleted",
		"system":      "store_connection_lost store_connection_restored high_latency webhook_delivery_failed webhook_test",
		"webhook":     "created updated paused resumed disabled deleted disabled_via_tenant_cascade",
	} {
		for n := range strings.FieldsSeq(names) {
			m[category+"."+n] = true
		}
	}
	return m
}()

// categories are the categories of that vocabulary.
var categories = map[string]bool{
	"budget": true, "tenant": true, "api_key": true, "policy": true,
	"reservation": true, "system": true, "webhook": true,
}

// KnownEventType reports whether t is in upstream 0.1.25.24's vocabulary.
// Event types stay open strings: an unknown one is delivered, only flagged.
func KnownEventType(t string) bool { return eventTypes[t] }

// KnownCategory reports whether c is one of the vocabulary's categories.
func KnownCategory(c string) bool { return categories[c] }

// EventTypeCategory is the category of a known event type (its prefix), ""
// for an unknown one.
func EventTypeCategory(t string) string {
	if !eventTypes[t] {
		return ""
	}
	c, _, _ := strings.Cut(t, ".")
	return c
}

// TenantAccessibleCategory reports whether tenant-owned subscriptions may
// receive events of category c: budget, reservation and tenant.
func TenantAccessibleCategory(c string) bool {
	return c == "budget" || c == "reservation" || c == "tenant"
}
