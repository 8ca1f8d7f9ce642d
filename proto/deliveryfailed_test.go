package proto

import (
	"encoding/json"
	"testing"
	"time"
)

func TestDeliveryFailedEvent_IsWrittenAsUpstreamWritesIt(t *testing.T) {
	e := DeliveryFailedEvent{
		SubscriptionID: "whsub_3f9a2c1b7d4e8f60", TenantID: "acme-corp", DeliveryID: "del_66e435de3e733abc",
		EventID: "evt_5d7e9f1a3b5c7d9e", EventType: "budget.exhausted", Attempts: 6, LastStatus: 503, Error: "HTTP 503",
		RequestID: "req-1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		Timestamp: time.Date(2026, 4, 1, 12, 7, 41, 502117000, time.UTC),
	}
	want := `{"event_id":"evt_efef363067ed7a8b","event_type":"system.webhook_delivery_failed","category":"system",` +
		`"timestamp":"2026-04-01T12:07:41.502117Z","tenant_id":"__system__","actor":{"type":"system"},"source":"cycles-events",` +
		`"data":{"component":"webhook_dispatcher","message":"Webhook delivery failed after 6 attempts: subscription whsub_3f9a2c1b7d4e8f60",` +
		`"severity":"warning","details":{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","delivery_id":"del_66e435de3e733abc",` +
		`"event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","attempts":6,"last_response_status":503,"error":"HTTP 503"}},` +
		`"correlation_id":"webhook_delivery_failed:whsub_3f9a2c1b7d4e8f60:del_66e435de3e733abc","request_id":"req-1","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`
	if got := string(e.JSON()); got != want {
		t.Errorf("JSON =\n%s\nwant\n%s", got, want)
	}
}

func TestDeliveryFailedEvent_LeavesOutWhatIsUnknownAsUpstreamDoes(t *testing.T) {
	e := DeliveryFailedEvent{SubscriptionID: "whsub_1", DeliveryID: "del_1", Attempts: 1, Timestamp: time.Unix(0, 0)}
	var got struct {
		RequestID *string `json:"request_id"`
		TraceID   *string `json:"trace_id"`
		Data      struct {
			Details map[string]any `json:"details"`
		} `json:"data"`
	}
	if err := json.Unmarshal(e.JSON(), &got); err != nil {
		t.Fatal(err)
	}
	if got.RequestID != nil || got.TraceID != nil {
		t.Errorf("request_id/trace_id written although unknown: %s", e.JSON())
	}
	d := got.Data.Details
	for _, k := range []string{"event_type", "last_response_status", "error"} {
		if _, ok := d[k]; ok {
			t.Errorf("details.%s written although unknown: %s", k, e.JSON())
		}
	}
	for _, k := range []string{"tenant_id", "event_id"} {
		if v, ok := d[k]; !ok || v != nil {
			t.Errorf("details.%s = %v, want null as a Java map writes it", k, v)
		}
	}
	if _, err := ParseEvent(e.JSON()); err != nil {
		t.Errorf("the event does not parse as a Cycles event: %v", err)
	}
}
