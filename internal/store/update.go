package store

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// casSetLua writes ARGV[2] only while the key still holds exactly ARGV[1],
// the bytes the patch was computed from. KEEPTTL leaves the remaining TTL
// untouched, and a vanished key is reported, never recreated: the reference
// recreated vanished deliveries without a TTL and leaked them (§8.25).
// Returns 1 written, 0 changed underneath, -1 gone.
const casSetLua = `local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1`

const (
	// maxUpdateAttempts bounds compare-and-set retries. Failure counting on a
	// hot subscription may see dozens of workers at once; each round one wins.
	maxUpdateAttempts = 64
	// maxConflictBackoff caps the random wait between attempts so contenders
	// spread out without slowing a single retry noticeably.
	maxConflictBackoff = 20 * time.Millisecond
)

// UpdateDelivery patches delivery:{id} atomically and losslessly.
//
// fn gets the current record and returns the fields to write; only those
// bytes of the stored JSON change. If another writer changed the record in
// between, fn is called again with the new state (so fn must be free of side
// effects beyond computing the patch). fn returning (nil, nil) or an empty
// patch writes nothing; an error from fn is returned as is. The remaining
// TTL is kept exactly. A missing key, or one deleted before the write, gives
// ErrNotFound and is never recreated; an unreadable record gives a
// *CorruptError without calling fn; losing the race maxUpdateAttempts times
// gives ErrConflict. It returns the record as written.
func (s *Store) UpdateDelivery(ctx context.Context, id string, fn func(cur *proto.Delivery) (Patch, error)) (*DeliveryRecord, error) {
	raw, d, err := update(ctx, s, DeliveryKey(id), proto.ParseDelivery, fn)
	if err != nil {
		return nil, err
	}
	return &DeliveryRecord{Raw: raw, Delivery: d}, nil
}

// UpdateSubscription patches webhook:{id} the way UpdateDelivery patches a
// delivery. Admin rewrites the whole record with a plain SET; such a write
// landing between our read and write makes the compare fail and fn run
// again on admin's version, so neither write is lost.
func (s *Store) UpdateSubscription(ctx context.Context, id string, fn func(cur *proto.Subscription) (Patch, error)) (*SubscriptionRecord, error) {
	raw, sub, err := update(ctx, s, SubscriptionKey(id), proto.ParseSubscription, fn)
	if err != nil {
		return nil, err
	}
	return &SubscriptionRecord{Raw: raw, Subscription: sub}, nil
}

// update is the read → patch → compare-and-set loop shared by both records.
func update[T any](ctx context.Context, s *Store, key string, parse func([]byte) (T, error), fn func(T) (Patch, error)) ([]byte, T, error) {
	var zero T
	for attempt := range maxUpdateAttempts {
		if attempt > 0 {
			if err := conflictBackoff(ctx, attempt); err != nil {
				return nil, zero, err
			}
		}
		raw, err := s.get(ctx, key)
		if err != nil {
			return nil, zero, err
		}
		cur, err := parse(raw)
		if err != nil {
			return nil, zero, &CorruptError{Key: key, Err: err}
		}
		patch, err := fn(cur)
		if err != nil {
			return nil, zero, err
		}
		if len(patch) == 0 {
			return raw, cur, nil
		}
		next, err := patch.apply(raw)
		if err != nil {
			return nil, zero, err
		}
		written, err := parse(next)
		if err != nil {
			return nil, zero, fmt.Errorf("store: patch would leave %s unreadable: %w", strconv.Quote(key), err)
		}
		if bytes.Equal(next, raw) {
			return raw, written, nil
		}
		res, err := s.cas.Run(ctx, s.rdb, []string{key}, raw, next).Int()
		if err != nil {
			return nil, zero, fmt.Errorf("store: update %s: %w", strconv.Quote(key), err)
		}
		switch res {
		case 1:
			return next, written, nil
		case -1:
			return nil, zero, fmt.Errorf("%s vanished during update: %w", strconv.Quote(key), ErrNotFound)
		}
	}
	return nil, zero, fmt.Errorf("%s: %w", strconv.Quote(key), ErrConflict)
}

// conflictBackoff waits a random time that grows with the attempt number,
// so writers that collided do not collide again in lockstep.
func conflictBackoff(ctx context.Context, attempt int) error {
	ceiling := min(time.Duration(1<<min(attempt, 16))*50*time.Microsecond, maxConflictBackoff)
	t := time.NewTimer(rand.N(ceiling) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return nil
}
