package engine

import "github.com/jetrelay/jetrelay/proto"

// freshEvidence closes the subscription's breaker on this replica when an
// operator acted after it opened. Breakers live in memory, one per
// subscription per replica, so the signal must travel with the records
// every replica reads anyway, at no extra read:
//
//   - the subscription's updated_at, which admin writes when an operator
//     re-enables it or changes its URL (jetrelay's own writes, failure
//     counts and auto-disable, never touch it);
//   - the delivery's jetrelay_requeued_at, which `jetrelay deliveries
//     requeue` writes: an operator redrives after fixing the endpoint, and
//     a requeued delivery held by a breaker that backed off to minutes
//     would wait that long (or its whole retry schedule) for nothing.
//
// A marker on the requeued delivery rather than a per-subscription redrive
// time in Redis: it costs no read, and it is consumed by exactly the
// deliveries the operator redrove. If the endpoint is still down, their
// sends open the breaker again, after the marker's time, so the marker
// cannot hold a breaker closed.
func (e *Engine) freshEvidence(d *proto.Delivery, sub *proto.Subscription) {
	if sub.UpdatedAt != nil {
		e.breakers.closeIfChanged(d.SubscriptionID, sub.UpdatedAt.Time)
	}
	if d.RequeuedAt != nil {
		e.breakers.closeIfChanged(d.SubscriptionID, d.RequeuedAt.Time)
	}
}
