package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/proto"
)

// EmitRequest is an event to emit as admin would.
type EmitRequest struct {
	TenantID  string
	EventType string
	// Scope is matched against subscriptions' scope filters.
	Scope string
	// Data is the event's data object (JSON), or empty.
	Data          json.RawMessage
	CorrelationID string
	// TraceID (32 hex) becomes the event's and deliveries' trace id so the
	// whole flow lands in one trace; empty mints one.
	TraceID string
}

// ErrBadArgument is wrapped by every event that cannot be emitted as given.
var ErrBadArgument = errors.New("bad argument")

// EmitWarnings names what in r the reference validator (contract §6.9,
// proto.PayloadViolations) would flag once the engine handles the event:
// jetrelay still delivers it, as the reference does, but admin's API would
// never have emitted it, so an operator trying things out hears it here
// instead of in the engine's log.
func EmitWarnings(r EmitRequest) []string {
	ev := &proto.Event{EventID: "-", Source: "-", TenantID: r.TenantID, EventType: r.EventType,
		Category: proto.EventTypeCategory(r.EventType), Data: r.Data, Timestamp: &proto.Instant{Time: time.Now()}}
	var out []string
	seen := map[string]bool{}
	for _, rule := range proto.PayloadViolations(ev) {
		if seen[rule] {
			continue
		}
		seen[rule] = true
		switch rule {
		case "unknown_event_type":
			out = append(out, fmt.Sprintf("%q is not a Cycles event type: admin never emits it, and receivers that switch on the type will not know it (the engine logs unknown_event_type)", r.EventType))
		case "budget_data_shape":
			out = append(out, `budget events carry data.ledger_id (a non-blank string) and, when present, data.operation (CREDIT, DEBIT, RESET, RESET_SPENT, REPAY_DEBT, STATUS_CHANGE, CREATE or UPDATE): e.g. --data '{"ledger_id":"led_1","budget_id":"b_1"}'`)
		case "reset_spent_shape":
			out = append(out, "budget.reset_spent's data.spent_override_provided must be true or false")
		case "missing_required":
			// Filled in by the writer (id, source, time); a blank tenant is refused above.
		default:
			out = append(out, "the event breaks the reference validator's rule "+rule)
		}
	}
	return out
}

// EmitResult is the event written and the deliveries enqueued for it.
type EmitResult struct {
	EventID     string   `json:"event_id"`
	TraceID     string   `json:"trace_id"`
	DeliveryIDs []string `json:"delivery_ids"`
	// Hint explains an emit that matched no subscription.
	Hint string `json:"hint,omitempty"`
}

// Emit writes an event and its deliveries exactly as admin's live dispatch
// does (internal/admin: the same Lua, JSON and deterministic ids): every
// ACTIVE subscription of the tenant or of __system__ whose event types or
// categories, scope filter and ownership boundary match gets a PENDING
// delivery pushed onto dispatch:pending.
func (t *Tool) Emit(ctx context.Context, r EmitRequest) (*EmitResult, error) {
	if strings.TrimSpace(r.TenantID) == "" {
		return nil, fmt.Errorf("%w: a tenant is required (--tenant; __system__ for admin-plane events)", ErrBadArgument)
	}
	if r.TraceID != "" && !proto.ValidTraceID(r.TraceID) {
		return nil, fmt.Errorf("%w: trace id %q is not 32 lower-case hex digits", ErrBadArgument, r.TraceID)
	}
	if len(r.Data) > 0 && !json.Valid(r.Data) {
		return nil, fmt.Errorf("%w: --data is not valid JSON", ErrBadArgument)
	}
	// Like an emit inside one of admin's HTTP requests without an inbound
	// traceparent: a fresh trace, sampled, so the whole delivery can be
	// found by the trace id inspect prints.
	if r.TraceID == "" {
		r.TraceID = proto.NewTraceID()
	}
	inbound := false
	id, deliveries, err := t.admin.Emit(ctx, admin.Event{
		EventType: r.EventType, TenantID: r.TenantID, Scope: r.Scope, Data: r.Data,
		CorrelationID: r.CorrelationID, TraceID: r.TraceID, Actor: &proto.Actor{Type: "admin"},
	}, admin.TraceSnapshot{TraceID: r.TraceID, TraceFlags: "01", InboundValid: &inbound})
	if err != nil {
		return nil, err
	}
	res := &EmitResult{EventID: id, TraceID: r.TraceID, DeliveryIDs: deliveries}
	if res.DeliveryIDs == nil {
		res.DeliveryIDs = []string{}
	}
	if len(deliveries) == 0 {
		res.Hint = fmt.Sprintf("no ACTIVE subscription of tenant %s or __system__ takes %s events", r.TenantID, r.EventType)
		if r.Scope != "" {
			res.Hint += " in scope " + r.Scope
		}
		res.Hint += " (subscriptions owned by a tenant only get budget, reservation and tenant events); create one with `jetrelay subscriptions create`"
	}
	return res, nil
}
