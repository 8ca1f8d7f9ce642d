package receive

import (
	"context"
	"sync"
	"time"
)

// MemoryStore is a Store in process memory, for a single-process receiver
// and for tests. It forgets everything on restart, so a receiver with more
// than one replica, or whose duplicates matter across restarts, uses
// redisstore.Store or pgstore.Store. Done ids are kept for the TTL given to
// NewMemoryStore.
type MemoryStore struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]memoryEntry
}

// DefaultTTL is how long a store remembers a processed event id by default:
// longer than the sender's 24 h delivery window, so every retry and most
// replays of an event find it.
const DefaultTTL = 72 * time.Hour

type memoryEntry struct {
	token string // "" once done
	until time.Time
}

// NewMemoryStore returns an empty MemoryStore remembering done ids for ttl
// (DefaultTTL when ttl <= 0).
func NewMemoryStore(ttl time.Duration) *MemoryStore {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &MemoryStore{ttl: ttl, now: time.Now, entries: make(map[string]memoryEntry)}
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, eventID, token string, lease time.Duration) (ClaimState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweep(now)
	if e, ok := s.entries[eventID]; ok && now.Before(e.until) {
		if e.token == "" {
			return Done, nil
		}
		return InProgress, nil
	}
	s.entries[eventID] = memoryEntry{token: token, until: now.Add(lease)}
	return Claimed, nil
}

// Complete implements Store.
func (s *MemoryStore) Complete(_ context.Context, eventID, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[eventID] = memoryEntry{until: s.now().Add(s.ttl)}
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, eventID, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[eventID]; ok && e.token == token {
		delete(s.entries, eventID)
	}
	return nil
}

// sweep drops expired entries once the map has grown, so memory stays
// bounded by the ids seen within the TTL.
func (s *MemoryStore) sweep(now time.Time) {
	if len(s.entries) < 1024 || len(s.entries)%1024 != 0 {
		return
	}
	for id, e := range s.entries {
		if !now.Before(e.until) {
			delete(s.entries, id)
		}
	}
}
