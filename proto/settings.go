package proto

import "fmt"

// SubscriptionSettings are jetrelay's own settings of one subscription. They
// live in their own record (jetrelay:subscription:{id}, beside admin's
// webhook:{id}) because admin rewrites the subscription record whole on every
// edit and drops the fields it does not know: a setting kept there would
// vanish at the next PATCH. A subscription without the record has every
// setting at the fleet default.
//
// Each feature adds its fields here; the record is patched field by field
// (unknown fields kept), so an older jetrelay that does not know a field
// leaves it alone.
type SubscriptionSettings struct {
	// Standard Webhooks (docs/security.md): nil follows the fleet default
	// (JETRELAY_STANDARD_WEBHOOKS).
	StandardWebhooks *bool `json:"standard_webhooks,omitempty"`
	// The secret rotation jetrelay keeps for Standard Webhooks: Secret is a
	// copy of webhook:secret:{id} as last seen (stored form, "enc:…" like
	// admin's), so that when admin replaces it the old one is still known;
	// PreviousSecret is that old one (stored form too), signed with beside
	// the current until PreviousSecretUntil. Never logged, never printed.
	Secret              string   `json:"secret,omitempty"`
	PreviousSecret      string   `json:"previous_secret,omitempty"`
	PreviousSecretUntil *Instant `json:"previous_secret_until,omitempty"`
	// Ordering (issue 23): none, first-attempt or strict; absent means the
	// fleet default (JETRELAY_ORDERING).
	Ordering string `json:"ordering,omitempty"`
}

// ParseSubscriptionSettings decodes a jetrelay:subscription:{id} record. It
// must be a JSON object; unknown fields are ignored (a newer release's).
func ParseSubscriptionSettings(raw []byte) (*SubscriptionSettings, error) {
	var s SubscriptionSettings
	if err := unmarshalRecord(raw, &s); err != nil {
		return nil, fmt.Errorf("proto: malformed subscription settings record: %w", err)
	}
	return &s, nil
}
