package proto

import (
	"strings"
	"testing"
)

func TestKnownEventTypes_AreTheProtocolPagesFortySevenAndTheFourCascadeTypes(t *testing.T) {
	// The protocol page (seed 004) lists these 47 and the four cascade types.
	page := `budget.created budget.updated budget.funded budget.debited budget.reset budget.reset_spent budget.debt_repaid
		budget.frozen budget.unfrozen budget.closed budget.threshold_crossed budget.exhausted budget.over_limit_entered
		budget.over_limit_exited budget.debt_incurred budget.burn_rate_anomaly
		reservation.denied reservation.denial_rate_spike reservation.expired reservation.expiry_rate_spike reservation.commit_overage
		tenant.created tenant.updated tenant.suspended tenant.reactivated tenant.closed tenant.settings_changed
		api_key.created api_key.revoked api_key.expired api_key.permissions_changed api_key.auth_failed api_key.auth_failure_rate_spike
		policy.created policy.updated policy.deleted
		webhook.created webhook.updated webhook.paused webhook.resumed webhook.disabled webhook.deleted
		system.store_connection_lost system.store_connection_restored system.high_latency system.webhook_delivery_failed system.webhook_test
		budget.closed_via_tenant_cascade reservation.released_via_tenant_cascade api_key.revoked_via_tenant_cascade webhook.disabled_via_tenant_cascade`
	types := strings.Fields(page)
	if len(types) != 51 {
		t.Fatalf("the list has %d types, want 47 + 4", len(types))
	}
	for _, typ := range types {
		if !KnownEventType(typ) {
			t.Errorf("%s is not known", typ)
		}
	}
	if len(eventTypes) != len(types) {
		t.Errorf("%d known types, want exactly the %d of the protocol page", len(eventTypes), len(types))
	}
}
