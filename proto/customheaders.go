package proto

import (
	"maps"
	"slices"
)

// DropReservedHeaders returns a subscription's custom headers without the
// names ReservedHeader refuses, and the names it dropped, sorted. Admin does
// not validate header names, so records with a custom Content-Type or an
// X-Cycles-* header exist; like the reference since 0.1.25.18 the delivery
// goes out without them (and with the relay's own values) instead of failing.
// headers itself is returned when nothing is dropped; it is never modified.
func DropReservedHeaders(headers map[string]string) (kept map[string]string, dropped []string) {
	for name := range headers {
		if ReservedHeader(name) {
			dropped = append(dropped, name)
		}
	}
	if len(dropped) == 0 {
		return headers, nil
	}
	kept = maps.Clone(headers)
	for _, name := range dropped {
		delete(kept, name)
	}
	slices.Sort(dropped)
	return kept, dropped
}
