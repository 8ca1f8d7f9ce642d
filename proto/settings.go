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
