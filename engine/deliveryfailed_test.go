package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/proto"
)

func TestDeliveryFailedEvent_OneSystemEventPerExhaustedDeliveryWrittenWithItsFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	down, _, _ := e.subscribe(t, "/down", receiver.Always(http.StatusServiceUnavailable), func(s *admin.Subscription) { s.RetryPolicy = fastPolicy(1) })
	up, _, _ := e.subscribe(t, "/up", receiver.Healthy(), nil)
	ev := e.event()
	failed := e.deliver(t, down, ev, nil)
	rec := e.final(t, failed)
	e.final(t, e.deliver(t, up, e.event(), nil))
	if rec.Status != proto.DeliveryFailed {
		t.Fatalf("record = %s; want FAILED", rec.Raw)
	}
	// Written in the same script as FAILED: present the moment the delivery is final.
	ids, err := e.redis.Client.ZRange(ctx, "events:__system__", 0, -1).Result()
	if err != nil || len(ids) != 1 {
		t.Fatalf("events:__system__ = %v, %v; want exactly the one failed delivery's event", ids, err)
	}
	raw, err := e.redis.Client.Get(ctx, "event:"+ids[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		EventType     string `json:"event_type"`
		Category      string `json:"category"`
		TenantID      string `json:"tenant_id"`
		Source        string `json:"source"`
		CorrelationID string `json:"correlation_id"`
		RequestID     string `json:"request_id"`
		TraceID       string `json:"trace_id"`
		Actor         struct {
			Type string `json:"type"`
		} `json:"actor"`
		Data struct {
			Component string         `json:"component"`
			Message   string         `json:"message"`
			Severity  string         `json:"severity"`
			Details   map[string]any `json:"details"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	cid := "webhook_delivery_failed:" + down + ":" + failed
	want := map[string][2]string{
		"event_type":     {got.EventType, "system.webhook_delivery_failed"},
		"category":       {got.Category, "system"},
		"tenant_id":      {got.TenantID, "__system__"},
		"actor.type":     {got.Actor.Type, "system"},
		"source":         {got.Source, "cycles-events"},
		"correlation_id": {got.CorrelationID, cid},
		"request_id":     {got.RequestID, ev.RequestID},
		"trace_id":       {got.TraceID, ev.TraceID},
		"data.component": {got.Data.Component, "webhook_dispatcher"},
		"data.severity":  {got.Data.Severity, "warning"},
		"data.message":   {got.Data.Message, "Webhook delivery failed after 2 attempts: subscription " + down},
	}
	for field, v := range want {
		if v[0] != v[1] {
			t.Errorf("%s = %q, want %q", field, v[0], v[1])
		}
	}
	d := got.Data.Details
	if d["subscription_id"] != down || d["delivery_id"] != failed || d["event_id"] != rec.EventID || d["event_type"] != "budget.exhausted" ||
		d["attempts"] != 2.0 || d["last_response_status"] != 503.0 ||
		d["tenant_id"] != e.tenant || d["error"] != "HTTP 503" {
		t.Errorf("details = %v", d)
	}
	if members, _ := e.redis.Client.SMembers(ctx, "events:correlation:"+cid).Result(); len(members) != 1 || members[0] != ids[0] {
		t.Errorf("correlation set = %v, want the event", members)
	}
	if _, err := e.redis.Client.ZScore(ctx, "events:_all", ids[0]).Result(); err != nil {
		t.Errorf("event not in events:_all: %v", err)
	}
}
