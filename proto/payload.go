package proto

import (
	"bytes"
	"encoding/json"
	"strings"

	gojson "github.com/goccy/go-json"
)

// budgetOperations are the values data.operation may take on a budget event.
var budgetOperations = map[string]bool{
	"CREDIT": true, "DEBIT": true, "RESET": true, "RESET_SPENT": true,
	"REPAY_DEBT": true, "STATUS_CHANGE": true, "CREATE": true, "UPDATE": true,
}

// PayloadViolations returns the reference validator's rule tags that ev
// breaks (contract §6.9, plus unknown_category from upstream 0.1.25.21), in
// a stable order; budget_data_shape may appear twice, as it fires there.
// The engine logs and counts them (never refusing the event, as the
// reference does not); `jetrelay events emit` warns with them.
// A blank string field counts as null: the parsed record cannot tell them
// apart.
func PayloadViolations(ev *Event) []string {
	var rules []string
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	if blank(ev.EventID) || blank(ev.EventType) || blank(ev.TenantID) || blank(ev.Source) || ev.Category == "" || ev.Timestamp == nil {
		rules = append(rules, "missing_required")
	}
	known := KnownEventType(ev.EventType)
	if !blank(ev.EventType) && !known {
		rules = append(rules, "unknown_event_type")
	}
	if ev.Category != "" && !KnownCategory(ev.Category) {
		rules = append(rules, "unknown_category")
	}
	if known && ev.Category != "" && ev.Category != EventTypeCategory(ev.EventType) {
		rules = append(rules, "category_mismatch")
	}
	if ev.TraceID != "" && !ValidTraceID(ev.TraceID) {
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
	if EventTypeCategory(ev.EventType) == "budget" {
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
