package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Liveness keys. Every running jetrelay replica keeps a heartbeat key with a
// short TTL alive: a bridge HeartbeatKey (listed in BridgesSet), an engine
// EngineHeartbeatKey (listed in EnginesSet). A key that exists is a positive
// sign that its replica runs; a replica killed without a clean stop is taken
// for alive until its key expires. Operator tools (`jetrelay handback`,
// `jetrelay status`) read them with LiveReplicas.
const (
	// EnginesSet is the SET of engine replica ids that may be alive; a
	// member whose heartbeat expired is dropped by LiveReplicas.
	EnginesSet = "jetrelay:engines"
	// EngineHeartbeatTTL is how long an engine's heartbeat outlives its last
	// refresh (every third of it): how long a killed engine still counts as
	// running.
	EngineHeartbeatTTL = 5 * time.Second
)

// EngineHeartbeatKey is the key whose TTL says engine replica id is alive.
func EngineHeartbeatKey(id string) string { return "jetrelay:engine:" + id }

// BeatEngine writes engine replica id's heartbeat with its TTL (value is for
// operators) and keeps it in EnginesSet, atomically.
func (s *Store) BeatEngine(ctx context.Context, id, value string, ttl time.Duration) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, EngineHeartbeatKey(id), value, ttl)
		p.SAdd(ctx, EnginesSet, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: engine heartbeat %s: %w", id, err)
	}
	return nil
}

// StopEngine removes engine replica id's heartbeat and registry entry: it
// has stopped, and nothing needs to wait for its key to expire.
func (s *Store) StopEngine(ctx context.Context, id string) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, EngineHeartbeatKey(id))
		p.SRem(ctx, EnginesSet, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: remove engine heartbeat %s: %w", id, err)
	}
	return nil
}

// Replica is one jetrelay replica whose heartbeat is alive.
type Replica struct {
	Role string `json:"role"` // "bridge" or "engine"
	ID   string `json:"id"`
	Key  string `json:"key"` // its heartbeat key
	// Heartbeat is the heartbeat's value ("pid=… beat_at_ms=…").
	Heartbeat string `json:"heartbeat,omitempty"`
	// ExpiresIn is how long the heartbeat lasts without another refresh:
	// a replica that was killed counts as alive until then. 0 means the
	// key has no TTL (written by hand): alive until someone deletes it.
	ExpiresIn time.Duration `json:"expires_in"`
}

// String names the replica for an operator: role, id, heartbeat and until
// when it lasts.
func (r Replica) String() string {
	if r.ExpiresIn <= 0 {
		return fmt.Sprintf("%s %s (%s; its heartbeat key %s has no TTL: delete it if that replica is gone)", r.Role, r.ID, r.Heartbeat, r.Key)
	}
	return fmt.Sprintf("%s %s (%s; heartbeat lasts until %s, %s from now)", r.Role, r.ID, r.Heartbeat,
		time.Now().Add(r.ExpiresIn).UTC().Format("15:04:05.0Z"), r.ExpiresIn.Round(100*time.Millisecond))
}

// forgetEngineLua drops an engine from EnginesSet once its heartbeat is
// gone; checking inside the script keeps an engine that beats again.
//
//	KEYS = [jetrelay:engines, its heartbeat]  ARGV = [id]
var forgetEngineLua = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
return redis.call('SREM', KEYS[1], ARGV[1])
`)

// LiveReplicas returns every bridge and engine whose heartbeat key exists,
// bridges first, each sorted by id. It drops engines whose heartbeat expired
// from EnginesSet (bridges stay in BridgesSet while their processing list
// holds ids; the bridges forget them).
func (s *Store) LiveReplicas(ctx context.Context) ([]Replica, error) {
	bridges, err := s.rdb.SMembers(ctx, BridgesSet).Result()
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", BridgesSet, err)
	}
	engines, err := s.rdb.SMembers(ctx, EnginesSet).Result()
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", EnginesSet, err)
	}
	slices.Sort(bridges)
	slices.Sort(engines)
	type probe struct {
		role, id, key string
		val           *redis.StringCmd
		ttl           *redis.DurationCmd
	}
	var probes []probe
	for _, id := range bridges {
		probes = append(probes, probe{role: "bridge", id: id, key: HeartbeatKey(id)})
	}
	for _, id := range engines {
		probes = append(probes, probe{role: "engine", id: id, key: EngineHeartbeatKey(id)})
	}
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range probes {
			probes[i].val = p.Get(ctx, probes[i].key)
			probes[i].ttl = p.PTTL(ctx, probes[i].key)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: read heartbeats: %w", err)
	}
	var live []Replica
	for _, p := range probes {
		val, err := p.val.Result()
		switch {
		case errors.Is(err, redis.Nil):
			if p.role == "engine" {
				if err := forgetEngineLua.Run(ctx, s.rdb, []string{EnginesSet, p.key}, p.id).Err(); err != nil {
					return nil, fmt.Errorf("store: forget engine %s: %w", p.id, err)
				}
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("store: read heartbeat %s: %w", p.key, err)
		}
		// PTTL is -1 for a key without a TTL (written by hand): alive until
		// someone removes it, reported as 0.
		live = append(live, Replica{Role: p.role, ID: p.id, Key: p.key, Heartbeat: strings.TrimSpace(val), ExpiresIn: max(p.ttl.Val(), 0)})
	}
	return live, nil
}
