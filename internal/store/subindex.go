package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Subscription index sets admin keeps (contract §2): every subscription id
// in AllSubscriptions, and per owner in TenantSubscriptions.
const AllSubscriptions = "webhooks:_all"

// TenantSubscriptions is the SET of one tenant's subscription ids
// (__system__ for admin-plane ones).
func TenantSubscriptions(tenant string) string { return "webhooks:" + tenant }

// SubscriptionRaw reads the stored JSON of subscription id. A missing record
// is ErrNotFound.
func (s *Store) SubscriptionRaw(ctx context.Context, id string) ([]byte, error) {
	return s.get(ctx, SubscriptionKey(id))
}

// ListSubscriptions reads the ids in index (AllSubscriptions or
// TenantSubscriptions), sorted, and their records in one round trip. A
// record deleted since the index was read, or a key that is not a string,
// is left out.
func (s *Store) ListSubscriptions(ctx context.Context, index string) (ids []string, records [][]byte, err error) {
	members, err := s.rdb.SMembers(ctx, index).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("store: read %s: %w", index, err)
	}
	slices.Sort(members)
	keys := make([]string, len(members))
	for i, id := range members {
		keys[i] = SubscriptionKey(id)
	}
	for i, cmd := range s.gets(ctx, keys...) {
		raw, err := cmd.Bytes()
		switch err := classifyGet(keys[i], err); {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrCorrupt):
			continue
		case err != nil:
			return nil, nil, err
		}
		ids, records = append(ids, members[i]), append(records, raw)
	}
	return ids, records, nil
}
