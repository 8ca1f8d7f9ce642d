package proto

import (
	"crypto/rand"
	"encoding/hex"
)

// eventIDPrefix is the prefix every Cycles event id carries.
const eventIDPrefix = "evt_"

// NewEventID returns a fresh random event id in the Cycles form: "evt_"
// followed by 16 lowercase hex digits (8 random bytes).
func NewEventID() string {
	var b [8]byte
	// crypto/rand.Read never fails (it aborts the program instead).
	_, _ = rand.Read(b[:])
	out := make([]byte, len(eventIDPrefix)+hex.EncodedLen(len(b)))
	copy(out, eventIDPrefix)
	hex.Encode(out[len(eventIDPrefix):], b[:])
	return string(out)
}
