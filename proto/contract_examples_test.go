package proto

// Record examples copied byte for byte from the contract
// (/work/shared/contract/cycles-events-contract.md §3).
const (
	// exampleSubscription is admin POST /v1/admin/webhooks?tenant_id=acme-corp (§3.1).
	exampleSubscription = `{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","name":"PagerDuty budget alerts","url":"https://hooks.example.com/cycles","event_types":["budget.exhausted","reservation.denied"],"event_categories":["tenant"],"scope_filter":"tenant:acme-corp/*","headers":{"Authorization":"Bearer tok_abc"},"status":"ACTIVE","retry_policy":{"max_retries":5,"initial_delay_ms":1000,"backoff_multiplier":2.0,"max_delay_ms":60000},"disable_after_failures":10,"consecutive_failures":0,"created_at":"2026-04-01T12:00:00.123456Z"}`

	// exampleBudgetExhaustedEvent is runtime-emitted budget.exhausted; also the exact outbound body (§3.2, 498 bytes).
	exampleBudgetExhaustedEvent = `{"event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","category":"budget","timestamp":"2026-04-01T12:00:00.118Z","tenant_id":"acme-corp","scope":"tenant:acme-corp/workspace:prod","actor":{"type":"api_key","key_id":"key_7f3a"},"source":"cycles-server","data":{"ledger_id":"led_01hx","scope":"tenant:acme-corp/workspace:prod","unit":"TOKENS","allocated":10000,"remaining":0,"spent":10000},"request_id":"2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`

	// exampleWebhookCreatedEvent is admin lifecycle webhook.created (§3.2).
	exampleWebhookCreatedEvent = `{"event_id":"evt_1a2b3c4d5e6f7a8b","event_type":"webhook.created","category":"webhook","timestamp":"2026-04-01T12:00:00.123456Z","tenant_id":"acme-corp","actor":{"type":"admin"},"source":"cycles-admin","data":{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","new_status":"ACTIVE","changed_fields":[]},"correlation_id":"webhook_create:whsub_3f9a2c1b7d4e8f60","request_id":"2f1c9a5e-6b7d-4e8f-9a0b-1c2d3e4f5a6b","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`

	// exampleWebhookDisabledEvent is events-emitted webhook.disabled on auto-disable (§3.2).
	exampleWebhookDisabledEvent = `{"event_id":"evt_8c1d2e3f4a5b6c7d","event_type":"webhook.disabled","category":"webhook","timestamp":"2026-04-01T12:07:41.502117Z","tenant_id":"acme-corp","actor":{"type":"system"},"source":"cycles-events","data":{"subscription_id":"whsub_3f9a2c1b7d4e8f60","tenant_id":"acme-corp","previous_status":"ACTIVE","new_status":"DISABLED","changed_fields":[],"disable_reason":"consecutive_failures_exceeded_threshold"},"correlation_id":"webhook_auto_disable:whsub_3f9a2c1b7d4e8f60:del_66e435de3e733abc","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`

	// examplePendingDelivery is admin live dispatch, no valid inbound traceparent (§3.3).
	examplePendingDelivery = `{"delivery_id":"del_66e435de3e733abc","subscription_id":"whsub_3f9a2c1b7d4e8f60","event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","status":"PENDING","attempted_at":"2026-04-01T12:00:00.130211Z","attempts":0,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","trace_flags":"01","traceparent_inbound_valid":false}`

	// exampleRetryingDelivery is events write-back after attempt 1 got HTTP 503 (§3.3).
	exampleRetryingDelivery = `{"delivery_id":"del_66e435de3e733abc","subscription_id":"whsub_3f9a2c1b7d4e8f60","event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","status":"RETRYING","attempted_at":"2026-04-01T12:00:00.130211Z","completed_at":null,"attempts":1,"response_status":503,"response_time_ms":87,"error_message":"HTTP 503","next_retry_at":"2026-04-01T12:00:01.224Z","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","trace_flags":"01","traceparent_inbound_valid":false}`
)
