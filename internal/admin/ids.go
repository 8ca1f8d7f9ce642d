package admin

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
)

// DeliveryID is the id admin's live dispatch gives the delivery of eventID to
// subscriptionID: "del_" + the first 16 hex digits of Java's
// UUID.nameUUIDFromBytes(eventID + "|" + subscriptionID), a UUIDv3 (MD5).
// Being deterministic is what makes a re-emitted event a no-op under
// SaveAndEnqueueOnceLua.
func DeliveryID(eventID, subscriptionID string) string {
	sum := md5.Sum([]byte(eventID + "|" + subscriptionID))
	sum[6] = sum[6]&0x0f | 0x30 // version 3; the variant byte (8) lies past the 16 digits kept
	return "del_" + hex.EncodeToString(sum[:8])
}

// NewSubscriptionID mints a subscription id as admin's WebhookService.create
// does: "whsub_" + the first 16 hex digits of a random UUIDv4 (so hex digit
// 12 is always '4').
func NewSubscriptionID() string { return "whsub_" + uuid4Prefix() }

// NewRandomDeliveryID mints the random delivery id that admin's replay and
// cycles-server use: "del_" + the first 16 hex digits of a random UUIDv4.
func NewRandomDeliveryID() string { return "del_" + uuid4Prefix() }

// NewSigningSecret generates a signing secret as admin does when a create
// request has none: "whsec_" + unpadded base64url of 32 random bytes.
func NewSigningSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// uuid4Prefix returns the first 16 hex digits of a random UUIDv4.
func uuid4Prefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	return hex.EncodeToString(b[:])
}
