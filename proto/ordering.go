package proto

import "fmt"

// Ordering is how a subscription's deliveries are ordered (DESIGN decision
// 17). The empty value means "the fleet default".
type Ordering string

// Orderings.
const (
	// OrderingNone sends a subscription's deliveries in parallel (the
	// default).
	OrderingNone Ordering = "none"
	// OrderingFirstAttempt sends the first attempts of a subscription's
	// deliveries one at a time, in the order they were enqueued; a
	// delivery waiting for a retry does not hold the later ones back.
	OrderingFirstAttempt Ordering = "first-attempt"
	// OrderingStrict sends a delivery only once every earlier delivery of
	// its subscription is SUCCESS or FAILED: retries hold the line.
	OrderingStrict Ordering = "strict"
)

// ParseOrdering reads a mode as an operator writes it ("" is the fleet
// default).
func ParseOrdering(s string) (Ordering, error) {
	switch o := Ordering(s); o {
	case "", OrderingNone, OrderingFirstAttempt, OrderingStrict:
		return o, nil
	}
	return "", fmt.Errorf("ordering %q: want none, first-attempt or strict", s)
}

// Ordered reports whether o keeps an order at all.
func (o Ordering) Ordered() bool { return o == OrderingFirstAttempt || o == OrderingStrict }

// Or is o, or def when o is the fleet default ("").
func (o Ordering) Or(def Ordering) Ordering {
	if o == "" {
		return def
	}
	return o
}
