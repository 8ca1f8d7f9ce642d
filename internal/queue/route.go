package queue

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers of a work item that name the records its delivery points to, as
// the bridge read them from the delivery record when it published the item.
// With them the engine reads the delivery and everything an attempt needs
// in one MGET instead of two round trips one after the other. They are a
// hint, never trusted: the engine uses the read only when the delivery
// record it returns names the same ids.
const (
	SubscriptionHeader = "Jetrelay-Subscription-Id"
	EventHeader        = "Jetrelay-Event-Id"
)

// Route is what a work item's headers say about its delivery's records.
type Route struct {
	SubscriptionID string
	EventID        string
}

// Known reports whether both ids are named.
func (r Route) Known() bool { return r.SubscriptionID != "" && r.EventID != "" }

// SetRoute puts r in msg's headers when both ids are named and fit in a
// header (ValidateDeliveryID's rules: a value from a hostile record must
// not break the header block); otherwise it leaves msg alone and the
// engine reads the records one after the other.
func SetRoute(msg *nats.Msg, r Route) {
	if !r.Known() || ValidateDeliveryID(r.SubscriptionID) != nil || ValidateDeliveryID(r.EventID) != nil {
		return
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header[SubscriptionHeader] = []string{r.SubscriptionID}
	msg.Header[EventHeader] = []string{r.EventID}
}

// RouteOf returns the route m's headers name, the zero Route when they
// name none.
func RouteOf(m jetstream.Msg) Route {
	h := m.Headers()
	if h == nil {
		return Route{}
	}
	return Route{SubscriptionID: h.Get(SubscriptionHeader), EventID: h.Get(EventHeader)}
}
