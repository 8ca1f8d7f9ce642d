package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/proto"
)

// OrderingIndex is the HASH subscription id → ordering mode of every
// subscription whose own settings record names a mode (SetOrdering keeps
// both). Bridges read it whole about once a second to route the
// deliveries of ordered subscriptions, so a fleet without ordering reads
// one empty hash a second and nothing per delivery.
const OrderingIndex = "jetrelay:ordering"

// MoverLease names the bridge that moves ids out of dispatch:pending while
// any subscription is ordered (bridge/route.go): several bridges moving at
// once would interleave their batches. MoverLast names the last bridge
// that held it, whose processing list the next holder adopts first.
const (
	MoverLease = "jetrelay:bridge:mover"
	MoverLast  = "jetrelay:bridge:mover:last"
)

// SetOrdering writes subscriptionID's own ordering mode into its settings
// record and the OrderingIndex; "" removes it (the fleet default applies).
func (s *Store) SetOrdering(ctx context.Context, subscriptionID string, mode proto.Ordering) error {
	if _, err := proto.ParseOrdering(string(mode)); err != nil {
		return err
	}
	var val any
	if mode != "" {
		val = string(mode)
	}
	if _, err := s.UpdateSettings(ctx, subscriptionID, func(*proto.SubscriptionSettings) (Patch, error) {
		return Patch{{Name: "ordering", Value: val}}, nil
	}); err != nil {
		return err
	}
	var err error
	if mode == "" {
		err = s.rdb.HDel(ctx, OrderingIndex, subscriptionID).Err()
	} else {
		err = s.rdb.HSet(ctx, OrderingIndex, subscriptionID, string(mode)).Err()
	}
	if err != nil {
		return fmt.Errorf("store: %s: %w", OrderingIndex, err)
	}
	return nil
}

// Orderings reads the OrderingIndex: the subscriptions whose own setting
// names a mode.
func (s *Store) Orderings(ctx context.Context) (map[string]proto.Ordering, error) {
	all, err := s.rdb.HGetAll(ctx, OrderingIndex).Result()
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", OrderingIndex, err)
	}
	out := make(map[string]proto.Ordering, len(all))
	for id, m := range all {
		if o, err := proto.ParseOrdering(strings.TrimSpace(m)); err == nil && o != "" {
			out[id] = o
		}
	}
	return out, nil
}

// takeMoverLua takes or renews the mover lease for ARGV[1] and returns the
// bridge that held it last ("" if none), or false while another holds it.
//
//	KEYS = [MoverLease, MoverLast]  ARGV = [instance, ttl ms]
var takeMoverLua = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return false end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local last = redis.call('GET', KEYS[2]) or ''
redis.call('SET', KEYS[2], ARGV[1])
return last
`)

// TakeMover takes or renews the mover lease for instanceID for ttl. held is
// false while another bridge holds it; last is the bridge that held it
// before (itself when renewing, "" the first time).
func (s *Store) TakeMover(ctx context.Context, instanceID string, ttl time.Duration) (held bool, last string, err error) {
	v, err := takeMoverLua.Run(ctx, s.rdb, []string{MoverLease, MoverLast}, instanceID, ttl.Milliseconds()).Result()
	if err == redis.Nil {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("store: take %s: %w", MoverLease, err)
	}
	last, _ = v.(string)
	return true, last, nil
}

// DropMover gives the mover lease up when instanceID holds it, so another
// bridge moves at once after a clean shutdown.
func (s *Store) DropMover(ctx context.Context, instanceID string) error {
	return dropMoverLua.Run(ctx, s.rdb, []string{MoverLease}, instanceID).Err()
}

var dropMoverLua = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`)
