package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jetrelay/jetrelay/proto"
)

// casPairFn defines casPair, casSetLua for a delivery and, when withSub is
// "1", its subscription: both are written only if both still hold the bytes
// the patches were computed from, so a delivery's final state and the
// failure it adds to its subscription land together or not at all. It
// returns 1 written, 0 changed underneath, -1 delivery gone, -2
// subscription gone. casPairLua, casPairManyLua and casPairEventLua call it:
// one definition of an outcome's compare-and-set.
const casPairFn = `local function casPair(dk, sk, dWas, dNow, withSub, sWas, sNow)
  local d = redis.call('GET', dk)
  if not d then return -1 end
  if d ~= dWas then return 0 end
  if withSub == '1' then
    local s = redis.call('GET', sk)
    if not s then return -2 end
    if s ~= sWas then return 0 end
    redis.call('SET', sk, sNow, 'KEEPTTL')
  end
  redis.call('SET', dk, dNow, 'KEEPTTL')
  return 1
end
`

// casPairLua is one outcome's casPair: KEYS[1] the delivery, KEYS[2] its
// subscription; ARGV[1..2] the delivery as read and as patched, ARGV[3] "1"
// when the subscription is written, ARGV[4..5] it as read and as patched.
const casPairLua = casPairFn + "return casPair(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])"

// OutcomeFunc computes the fields to change in a delivery and in its
// subscription from their current state. sub is nil when the subscription
// record no longer exists (or cannot be read); a nil or empty patch leaves
// that record alone. It may be called more than once and must have no side
// effects beyond computing the patches, and must not modify d or sub (sub
// may be shared with other readers of the same record).
type OutcomeFunc func(d *proto.Delivery, sub *proto.Subscription) (deliveryPatch, subscriptionPatch Patch, err error)

// RecordOutcome applies fn's patches to delivery rec and its subscription
// atomically and losslessly, as UpdateDelivery does for one record. It starts
// from the bytes the caller already read (rec.Raw and subRaw, which may be
// nil), so the usual case costs one round trip; on a conflict it reads both
// records again and calls fn again. It returns whether anything was written.
// A vanished delivery gives ErrNotFound; a subscription that vanished between
// read and write is read again (and fn sees nil).
func (s *Store) RecordOutcome(ctx context.Context, rec *DeliveryRecord, subRaw []byte, fn OutcomeFunc) (bool, error) {
	return s.RecordOutcomeAndSave(ctx, rec, subRaw, fn, nil)
}

// RecordOutcomeAndSave is RecordOutcome that, when ev is not nil, also saves
// ev (as SaveEvent does) in the same atomic write as the delivery's change:
// the event exists if and only if that change was written, so a crash can
// neither lose it nor, the delivery being final afterwards, save it twice.
func (s *Store) RecordOutcomeAndSave(ctx context.Context, rec *DeliveryRecord, subRaw []byte, fn OutcomeFunc, ev *NewEvent) (bool, error) {
	dKey, sKey := DeliveryKey(rec.DeliveryID), SubscriptionKey(rec.SubscriptionID)
	dRaw, d := rec.Raw, rec.Delivery
	for attempt := range maxUpdateAttempts {
		if attempt > 0 {
			if err := conflictBackoff(ctx, attempt); err != nil {
				return false, err
			}
			var err error
			if dRaw, d, subRaw, err = s.readPair(ctx, dKey, sKey); err != nil {
				return false, err
			}
		}
		var sub *proto.Subscription
		if subRaw != nil {
			if parsed, err := s.subs.parse(sKey, subRaw); err == nil {
				sub = parsed
			}
		}
		dp, sp, err := fn(d, sub)
		if err != nil {
			return false, err
		}
		if sub == nil {
			sp = nil
		}
		dNext, err := applyChecked(dKey, dRaw, dp, proto.ParseDelivery)
		if err != nil {
			return false, err
		}
		sNext, err := applyChecked(sKey, subRaw, sp, proto.ParseSubscription)
		if err != nil {
			return false, err
		}
		writeSub := len(sp) > 0 && !bytes.Equal(sNext, subRaw)
		if bytes.Equal(dNext, dRaw) && !writeSub {
			return false, nil
		}
		// The subscription's bytes go only when it is written: the script
		// reads them only then, and a success (most outcomes) would
		// otherwise carry the record twice for nothing.
		flag, sWas, sNow := "0", []byte(nil), []byte(nil)
		if writeSub {
			flag, sWas, sNow = "1", subRaw, sNext
		}
		var res int
		if ev == nil && s.outcomes != nil {
			res, err = s.outcomes.casPair(ctx, dKey, sKey, [5]any{dRaw, dNext, flag, sWas, sNow})
		} else {
			res, err = s.runCasPair(ctx, ev, []string{dKey, sKey}, dRaw, dNext, flag, sWas, sNow)
		}
		if err != nil {
			return false, fmt.Errorf("store: record outcome of %s: %w", strconv.Quote(dKey), err)
		}
		switch res {
		case 1:
			return true, nil
		case -1:
			return false, fmt.Errorf("%s vanished during update: %w", strconv.Quote(dKey), ErrNotFound)
		}
		// 0 (changed underneath) and -2 (subscription gone): read again.
	}
	return false, fmt.Errorf("%s: %w", strconv.Quote(dKey), ErrConflict)
}

// readPair reads a delivery and its subscription in one round trip. A
// missing or unreadable subscription comes back as nil bytes.
func (s *Store) readPair(ctx context.Context, dKey, sKey string) ([]byte, *proto.Delivery, []byte, error) {
	cmds := s.gets(ctx, dKey, sKey)
	dc, sc := cmds[0], cmds[1]
	dRaw, err := readRecord(dc, dKey)
	if err != nil {
		return nil, nil, nil, err
	}
	d, err := proto.ParseDelivery(dRaw)
	if err != nil {
		return nil, nil, nil, &CorruptError{Key: dKey, Err: err, Raw: dRaw}
	}
	sRaw, err := readRecord(sc, sKey)
	switch {
	case err == nil:
	case errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt):
		sRaw = nil
	default:
		return nil, nil, nil, err
	}
	return dRaw, d, sRaw, nil
}

// applyChecked applies p to raw and refuses a result that would no longer
// parse. An empty patch returns raw unchanged.
func applyChecked[T any](key string, raw []byte, p Patch, parse func([]byte) (T, error)) ([]byte, error) {
	if len(p) == 0 {
		return raw, nil
	}
	next, err := p.apply(raw)
	if err != nil {
		return nil, err
	}
	if _, err := parse(next); err != nil {
		return nil, fmt.Errorf("store: patch would leave %s unreadable: %w", strconv.Quote(key), err)
	}
	return next, nil
}
