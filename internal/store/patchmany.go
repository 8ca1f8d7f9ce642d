package store

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/jetrelay/jetrelay/proto"
)

// casManyLua is casSetLua for many delivery records at once: KEYS[i] is
// written with ARGV[2i] only if it still holds ARGV[2i-1]. Each record is
// decided on its own; the script returns one code per key: 1 written, 0
// changed underneath, -1 gone. One call for a batch saves what a script
// call costs per record on both ends (the command, its arguments' framing,
// the script's dispatch), which for a wait note is most of the write.
const casManyLua = `local out = {}
for i = 1, #KEYS do
  local cur = redis.call('GET', KEYS[i])
  if not cur then
    out[i] = -1
  elseif cur ~= ARGV[2*i-1] then
    out[i] = 0
  else
    redis.call('SET', KEYS[i], ARGV[2*i], 'KEEPTTL')
    out[i] = 1
  end
end
return out`

// DeliveryPatchFunc computes the fields to change in a delivery from its
// current state, as OutcomeFunc does without the subscription. It may be
// called more than once, must have no side effects and must not modify d.
type DeliveryPatchFunc func(d *proto.Delivery) Patch

// DeliveryPatch is one delivery record to patch: the record as the caller
// read it, and the patch to apply.
type DeliveryPatch struct {
	Rec   *DeliveryRecord
	Patch DeliveryPatchFunc
}

// PatchDeliveries applies each patch to its delivery record, atomically and
// losslessly per record, as RecordOutcome does for one record without a
// subscription: every record still holding the bytes its caller read is
// written in one script call (one round trip for the whole batch), and a
// record that changed underneath is read again and patched on its own. It
// returns one error per item, nil when the patch was written or had nothing
// to change; a vanished delivery's error wraps ErrNotFound.
func (s *Store) PatchDeliveries(ctx context.Context, items []DeliveryPatch) []error {
	errs := make([]error, len(items))
	keys := make([]string, 0, len(items))
	args := make([]any, 0, 2*len(items))
	batched := make([]int, 0, len(items)) // index in items of keys[j]
	for i, it := range items {
		key := DeliveryKey(it.Rec.DeliveryID)
		next, err := applyChecked(key, it.Rec.Raw, it.Patch(it.Rec.Delivery), proto.ParseDelivery)
		switch {
		case err != nil:
			errs[i] = err
		case !bytes.Equal(next, it.Rec.Raw):
			keys = append(keys, key)
			args = append(args, it.Rec.Raw, next)
			batched = append(batched, i)
		}
	}
	if len(keys) == 0 {
		return errs
	}
	codes, err := s.casMany.Run(ctx, s.scripter(), keys, args...).Int64Slice()
	if err == nil && len(codes) != len(keys) {
		err = fmt.Errorf("script returned %d results for %d records", len(codes), len(keys))
	}
	for j, i := range batched {
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("store: patch %s: %w", strconv.Quote(keys[j]), err)
		case codes[j] == -1:
			errs[i] = fmt.Errorf("%s vanished during update: %w", strconv.Quote(keys[j]), ErrNotFound)
		case codes[j] == 0:
			// Changed underneath: RecordOutcome reads it again and
			// retries, as for a single write.
			patch := items[i].Patch
			_, errs[i] = s.RecordOutcome(ctx, items[i].Rec, nil, func(d *proto.Delivery, _ *proto.Subscription) (Patch, Patch, error) {
				return patch(d), nil, nil
			})
		}
	}
	return errs
}
