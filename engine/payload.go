package engine

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"

	gojson "github.com/goccy/go-json"

	"github.com/jetrelay/jetrelay/proto"
)

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
	known := proto.KnownEventType(ev.EventType)
	if !blank(ev.EventType) && !known {
		rules = append(rules, "unknown_event_type")
	}
	if ev.Category != "" && !proto.KnownCategory(ev.Category) {
		rules = append(rules, "unknown_category")
	}
	if known && ev.Category != "" && ev.Category != proto.EventTypeCategory(ev.EventType) {
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
	if proto.EventTypeCategory(ev.EventType) == "budget" {
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
