package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

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
		return nil, fmt.Errorf("%w: a tenant is required (--tenant; __system__ for admin-plane events)", ErrBadFilter)
	}
	if r.TraceID != "" && !proto.ValidTraceID(r.TraceID) {
		return nil, fmt.Errorf("%w: trace id %q is not 32 lower-case hex digits", ErrBadFilter, r.TraceID)
	}
	if len(r.Data) > 0 && !json.Valid(r.Data) {
		return nil, fmt.Errorf("%w: --data is not valid JSON", ErrBadFilter)
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
