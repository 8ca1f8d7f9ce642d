package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jetrelay/jetrelay/proto"
)

// SettingsKey is where jetrelay keeps its own settings of subscription id
// (proto.SubscriptionSettings): out of admin's webhook:{id}, which admin
// rewrites whole and would strip of fields it does not know.
func SettingsKey(subscriptionID string) string { return "jetrelay:subscription:" + subscriptionID }

// MaxSettingsRecord bounds a settings record; anything larger is treated as
// unreadable rather than parsed.
const MaxSettingsRecord = 64 << 10

// Settings reads jetrelay:subscription:{id}. A subscription without the
// record has every setting at its default: that is not an error.
func (s *Store) Settings(ctx context.Context, subscriptionID string) (*proto.SubscriptionSettings, []byte, error) {
	key := SettingsKey(subscriptionID)
	raw, err := readRecord(s.gets(ctx, key)[0], key)
	if errors.Is(err, ErrNotFound) {
		return &proto.SubscriptionSettings{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	set, err := parseSettings(key, raw)
	return set, raw, err
}

func parseSettings(key string, raw []byte) (*proto.SubscriptionSettings, error) {
	if err := checkSize(key, raw, MaxSettingsRecord); err != nil {
		return nil, err
	}
	set, err := proto.ParseSubscriptionSettings(raw)
	if err != nil {
		return nil, &CorruptError{Key: key, Err: err, Raw: raw}
	}
	return set, nil
}

// UpdateSettings patches jetrelay:subscription:{id} atomically and
// losslessly, creating it (empty) first when the subscription has none. fn
// follows UpdateDelivery's rules. The record has no TTL: it lives as long as
// the subscription it belongs to.
func (s *Store) UpdateSettings(ctx context.Context, subscriptionID string, fn func(cur *proto.SubscriptionSettings) (Patch, error)) (*proto.SubscriptionSettings, error) {
	key := SettingsKey(subscriptionID)
	// An empty record first, so the patch goes through the same
	// compare-and-set as every other record.
	if err := s.rdb.SetNX(ctx, key, "{}", 0).Err(); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", strconv.Quote(key), err)
	}
	_, set, err := update(ctx, s, key, proto.ParseSubscriptionSettings, fn)
	return set, err
}
