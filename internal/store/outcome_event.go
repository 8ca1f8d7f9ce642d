package store

import (
	"context"
)

// casPairEventLua is casPairLua that, once the delivery (and subscription)
// are written, saves an event with SaveEventLua's own text, in the same
// script: KEYS[3..6] and ARGV[6..9] are SaveEventLua's KEYS and ARGV. Reusing
// both scripts verbatim keeps one definition of the compare-and-set and one
// of how Cycles stores an event.
const casPairEventLua = "local function saveEvent(KEYS, ARGV)\n" + SaveEventLua + "\nend\n" + casPairFn +
	`local r = casPair(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if r ~= 1 then return r end
saveEvent({KEYS[3], KEYS[4], KEYS[5], KEYS[6]}, {ARGV[6], ARGV[7], ARGV[8], ARGV[9]})
return 1`

// runCasPair runs casPairLua, or casPairEventLua when ev is not nil, and
// returns the script's result code.
func (s *Store) runCasPair(ctx context.Context, ev *NewEvent, keys []string, args ...any) (int, error) {
	if ev == nil {
		return s.casPair.Run(ctx, s.scripter(), keys, args...).Int()
	}
	evKeys, evArgs, err := eventArgs(*ev)
	if err != nil {
		return 0, err
	}
	return s.casPairEvent.Run(ctx, s.scripter(), append(keys, evKeys...), append(args, evArgs...)...).Int()
}
