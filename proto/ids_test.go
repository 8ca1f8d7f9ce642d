package proto

import (
	"strings"
	"testing"
)

func TestNewEventID_HasTheCyclesShape(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewEventID()
		hexPart, ok := strings.CutPrefix(id, "evt_")
		if !ok || len(hexPart) != 16 || !isLowerHex(hexPart) {
			t.Fatalf("NewEventID = %q, want evt_ + 16 lowercase hex", id)
		}
		if seen[id] {
			t.Fatalf("NewEventID repeated %q", id)
		}
		seen[id] = true
	}
}
