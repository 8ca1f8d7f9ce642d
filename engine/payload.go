package engine

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"

	gojson "github.com/goccy/go-json"

	"github.com/jetrelay/jetrelay/proto"
)

// knownEventTypes is the EventType vocabulary of upstream 0.1.25.24: the 47
// types of the protocol page (the 42 of 0.1.25.12, contract §6.9, plus the
// webhook lifecycle types added in 0.1.25.18) and the four
// *_via_tenant_cascade fan-out types added in 0.1.25.21: admin's 51.
var knownEventTypes = func() map[string]bool {
	m := make(map[string]bool)
	for prefix, names := range map[string]string{
		"budget":      "created updated funded debited reset reset_spent debt_repaid frozen unfrozen closed threshold_crossed exhausted over_limit_entered over_limit_exited debt_incurred burn_rate_anomaly closed_via_tenant_cascade",
		"reservation": "denied denial_rate_spike expired expiry_rate_spike commit_overage released_via_tenant_cascade",
		"tenant":      "created updated suspended reactivated closed settings_changed",
		"api_key":     "created revoked expired permissions_changed auth_failed auth_failure_rate_spike revoked_via_tenant_cascade",
		"policy":      "created updated deleted",
		"system":      "store_connection_lost store_connection_restored high_latency webhook_delivery_failed webhook_test",
		"webhook":     "created updated paused resumed disabled deleted disabled_via_tenant_cascade",
	} {
		for n := range strings.FieldsSeq(names) {
			m[prefix+"."+n] = true
		}
	}
	return m
}()

// knownCategories are the categories of that vocabulary.
var knownCategories = map[string]bool{
	"budget": true, "tenant": true, "api_key": true, "policy": true,
	"reservation": true, "system": true, "webhook": true,
}

// budgetOperations are the values data.operation may take on a budget event.
var budgetOperations = map[string]bool{
	"CREDIT": true, "DEBIT": true, "RESET": true, "RESET_SPENT": true,
	"REPAY_DEBT": true, "STATUS_CHANGE": true, "CREATE": true, "UPDATE": true,
}

// payloadViolations returns the reference validator's rule tags that ev
// breaks (contract §6.9, plus unknown_category from upstream 0.1.25.21), in
// a stable order; budget_data_shape may appear twice, as it fires there.
// A blank string field counts as null: the parsed record cannot tell them
// apart.
func payloadViolations(ev *proto.Event) []string {
	var rules []string
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	if blank(ev.EventID) || blank(ev.EventType) || blank(ev.TenantID) || blank(ev.Source) || ev.Category == "" || ev.Timestamp == nil {
		rules = append(rules, "missing_required")
	}
	known := knownEventTypes[ev.EventType]
	if !blank(ev.EventType) && !known {
		rules = append(rules, "unknown_event_type")
	}
	if ev.Category != "" && !knownCategories[ev.Category] {
		rules = append(rules, "unknown_category")
	}
	typeCategory, _, _ := strings.Cut(ev.EventType, ".")
	if known && ev.Category != "" && ev.Category != typeCategory {
		rules = append(rules, "category_mismatch")
	}
	if ev.TraceID != "" && !proto.ValidTraceID(ev.TraceID) {
		rules = append(rules, "trace_id_shape")
	}
	data := bytes.TrimSpace(ev.Data)
	if !known || len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return rules
	}
	var fields struct {
		LedgerID              json.RawMessage `json:"ledger_id"`
		Operation             json.RawMessage `json:"operation"`
		SpentOverrideProvided json.RawMessage `json:"spent_override_provided"`
	}
	isObject := gojson.Unmarshal(data, &fields) == nil
	if typeCategory == "budget" {
		var ledger string
		if !isObject || gojson.Unmarshal(fields.LedgerID, &ledger) != nil || blank(ledger) {
			rules = append(rules, "budget_data_shape")
		}
		var op string
		if present(fields.Operation) && (gojson.Unmarshal(fields.Operation, &op) != nil || !budgetOperations[op]) {
			rules = append(rules, "budget_data_shape")
		}
	}
	if ev.EventType == "budget.reset_spent" && present(fields.SpentOverrideProvided) {
		var b bool
		if gojson.Unmarshal(fields.SpentOverrideProvided, &b) != nil {
			rules = append(rules, "reset_spent_shape")
		}
	}
	return rules
}

// present reports a JSON value that is there and not null.
func present(v json.RawMessage) bool {
	return len(v) > 0 && !bytes.Equal(v, []byte("null"))
}

// checkPayload runs the validator on ev: a warning and a metric per broken
// rule, never a refusal (the reference delivers such events too).
func (e *Engine) checkPayload(log *slog.Logger, ev *proto.Event) {
	rules := payloadViolations(ev)
	if len(rules) == 0 {
		return
	}
	for _, r := range rules {
		e.obs.PayloadInvalid(ev.EventType, r)
	}
	log.Warn("event payload breaks the reference validator's rules; delivering it anyway",
		"event_type", oneLine(ev.EventType), "rules", strings.Join(rules, ","))
}

// oneLine replaces CR and LF, as the reference does in logged ids and types.
func oneLine(s string) string {
	return strings.NewReplacer("\r", "_", "\n", "_").Replace(s)
}
