package proto

// DeliveryStatus is the lifecycle state of a delivery:{id} record.
// The wire form is the Java enum name (upper case).
type DeliveryStatus string

// Delivery statuses, as cycles-server-admin and the events service write them.
const (
	DeliveryPending  DeliveryStatus = "PENDING"
	DeliveryRetrying DeliveryStatus = "RETRYING"
	DeliverySuccess  DeliveryStatus = "SUCCESS"
	DeliveryFailed   DeliveryStatus = "FAILED"
)

// Known reports whether s is one of the four statuses the contract defines.
func (s DeliveryStatus) Known() bool {
	switch s {
	case DeliveryPending, DeliveryRetrying, DeliverySuccess, DeliveryFailed:
		return true
	}
	return false
}

// Terminal reports whether no further attempt may be made.
func (s DeliveryStatus) Terminal() bool { return s == DeliverySuccess || s == DeliveryFailed }

// SubscriptionStatus is the state of a webhook:{id} subscription.
type SubscriptionStatus string

// Subscription statuses. Admin only lets an operator set ACTIVE and PAUSED;
// DISABLED is set by auto-disable and the tenant-close cascade.
const (
	SubscriptionActive   SubscriptionStatus = "ACTIVE"
	SubscriptionPaused   SubscriptionStatus = "PAUSED"
	SubscriptionDisabled SubscriptionStatus = "DISABLED"
)

// Known reports whether s is one of the three statuses the contract defines.
func (s SubscriptionStatus) Known() bool {
	switch s {
	case SubscriptionActive, SubscriptionPaused, SubscriptionDisabled:
		return true
	}
	return false
}
