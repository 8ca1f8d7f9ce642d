package admin

// Redis keys of the webhook plane (contract §2). A null tenant id becomes
// the literal "null" because that is what Java's string concatenation
// produces; this package only ever has "" for it.

const (
	keyEventsAll       = "events:_all"
	keyWebhooksAll     = "webhooks:_all"
	keyDispatchPending = "dispatch:pending"
)

// Retention the records are created with: event 90 days, delivery 14 days
// (events.retention.*-ttl-days defaults shared by admin and events).
const (
	eventTTLSeconds    = 90 * 86400
	deliveryTTLSeconds = 14 * 86400
)

func javaString(s string) string {
	if s == "" {
		return "null"
	}
	return s
}

func keyEvent(id string) string         { return "event:" + id }
func keyEvents(tenant string) string    { return "events:" + javaString(tenant) }
func keyCorrelation(cid string) string  { return "events:correlation:" + cid }
func keyWebhook(id string) string       { return "webhook:" + id }
func keyWebhooks(tenant string) string  { return "webhooks:" + javaString(tenant) }
func keyWebhookSecret(id string) string { return "webhook:secret:" + id }
func keyDelivery(id string) string      { return "delivery:" + id }
func keyDeliveries(subID string) string { return "deliveries:" + subID }
