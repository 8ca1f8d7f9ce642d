package engine

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

func TestBreakerStats_CountsBreakersByStateNotBySubscription(t *testing.T) {
	e := &Engine{breakers: newBreakers(BreakerConfig{Threshold: 2, OpenFor: time.Hour})}
	now := time.Now()
	for _, sub := range []string{"whsub_down1", "whsub_down2"} {
		for range 2 {
			done, _, ok := e.breakers.admit(sub, now)
			if !ok {
				t.Fatalf("%s refused before its threshold", sub)
			}
			done(errFailedAttempt)
		}
	}
	done, _, _ := e.breakers.admit("whsub_up", now)
	done(nil)
	if got, want := e.BreakerStats(), (BreakerStats{Closed: 1, Open: 2}); got != want {
		t.Errorf("BreakerStats() = %+v, want %+v", got, want)
	}
}

func TestPayloadViolations_FlagsTheReferenceValidatorsRules(t *testing.T) {
	ts := &proto.Instant{Time: time.Now()}
	good := func() *proto.Event {
		return &proto.Event{
			EventID: "evt_1", EventType: "budget.exhausted", Category: "budget", Timestamp: ts,
			TenantID: "acme", Source: "cycles-server", TraceID: "0123456789abcdef0123456789abcdef",
			Data: json.RawMessage(`{"ledger_id":"led_1","operation":"DEBIT"}`),
		}
	}
	cases := []struct {
		name   string
		change func(*proto.Event)
		want   []string
	}{
		{"a well-formed event breaks nothing", func(*proto.Event) {}, nil},
		{"a blank source is missing_required", func(e *proto.Event) { e.Source = " " }, []string{"missing_required"}},
		{"a null timestamp is missing_required", func(e *proto.Event) { e.Timestamp = nil }, []string{"missing_required"}},
		{"admin's webhook.created is known since 0.1.25.18", func(e *proto.Event) {
			e.EventType, e.Category, e.Data = "webhook.created", "webhook", nil
		}, nil},
		{"a tenant-close cascade type is known since 0.1.25.21", func(e *proto.Event) {
			e.EventType, e.Category, e.Data = "webhook.disabled_via_tenant_cascade", "webhook", nil
		}, nil},
		{"a type no Cycles service emits is unknown_event_type", func(e *proto.Event) {
			e.EventType, e.Category, e.Data = "webhook.exploded", "webhook", nil
		}, []string{"unknown_event_type"}},
		{"an unknown category is flagged and mismatches its type", func(e *proto.Event) { e.Category = "billing" }, []string{"unknown_category", "category_mismatch"}},
		{"a known but wrong category is category_mismatch", func(e *proto.Event) { e.Category = "tenant" }, []string{"category_mismatch"}},
		{"an uppercase trace id is trace_id_shape", func(e *proto.Event) { e.TraceID = "0123456789ABCDEF0123456789ABCDEF" }, []string{"trace_id_shape"}},
		{"a budget event without ledger_id and with a bad operation fires twice", func(e *proto.Event) {
			e.Data = json.RawMessage(`{"operation":"STEAL"}`)
		}, []string{"budget_data_shape", "budget_data_shape"}},
		{"a numeric ledger_id is budget_data_shape", func(e *proto.Event) { e.Data = json.RawMessage(`{"ledger_id":7}`) }, []string{"budget_data_shape"}},
		{"a non-boolean spent_override_provided is reset_spent_shape", func(e *proto.Event) {
			e.EventType, e.Data = "budget.reset_spent", json.RawMessage(`{"ledger_id":"l","spent_override_provided":"yes"}`)
		}, []string{"reset_spent_shape"}},
		{"null data is not checked", func(e *proto.Event) { e.Data = json.RawMessage(`null`) }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := good()
			c.change(ev)
			if got := proto.PayloadViolations(ev); !slices.Equal(got, c.want) {
				t.Errorf("PayloadViolations = %v, want %v", got, c.want)
			}
		})
	}
}
