package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SaveEventLua is SAVE_EVENT_LUA of contract §2.1 (admin's and the events
// service's EventRepository), verbatim, so events jetrelay writes land in
// Redis exactly as admin's and the reference's do. It is the one copy:
// internal/admin, which plays admin in tests, runs it too.
//
//	KEYS = [event:<id>, events:<tenantId>, events:_all, (events:correlation:<cid>)]
//	ARGV = [json, timestamp epoch millis, id, ttl seconds]
const SaveEventLua = `redis.call('SET', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
if KEYS[4] then
    redis.call('SADD', KEYS[4], ARGV[3])
    redis.call('EXPIRE', KEYS[4], ARGV[4])
end
return 1`

// SaveEvent stores an event the way admin does: event:{id} with a TTL, the
// id in events:{tenant} and events:_all scored by its timestamp in epoch
// millis, and in events:correlation:{cid} when correlationID is not blank.
// An empty tenantID goes to events:null, the key Java's string concatenation
// of a null tenant produces. ttl must be at least one second.
func (s *Store) SaveEvent(ctx context.Context, raw []byte, eventID, tenantID, correlationID string, ts time.Time, ttl time.Duration) error {
	keys, args, err := eventArgs(NewEvent{Raw: raw, EventID: eventID, TenantID: tenantID, CorrelationID: correlationID, Timestamp: ts, TTL: ttl})
	if err != nil {
		return err
	}
	if err := s.saveEvent.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("store: save event %s: %w", eventID, err)
	}
	return nil
}

// NewEvent is an event record to save, with what its indexes need.
type NewEvent struct {
	Raw           []byte // the event:{id} JSON
	EventID       string
	TenantID      string // empty: indexed under events:null
	CorrelationID string // blank: no events:correlation:{cid} set
	Timestamp     time.Time
	TTL           time.Duration // at least one second
}

// eventArgs checks ev and returns SaveEventLua's KEYS and ARGV for it.
func eventArgs(ev NewEvent) ([]string, []any, error) {
	switch {
	case ev.EventID == "":
		return nil, nil, errors.New("store: save event: empty event id")
	case ev.TTL < time.Second:
		return nil, nil, fmt.Errorf("store: save event %s: ttl %v is below one second", ev.EventID, ev.TTL)
	case !json.Valid(ev.Raw):
		return nil, nil, fmt.Errorf("store: save event %s: record is not valid JSON", ev.EventID)
	}
	tenantKey := "events:" + ev.TenantID
	if ev.TenantID == "" {
		tenantKey = "events:null"
	}
	keys := []string{EventKey(ev.EventID), tenantKey, "events:_all"}
	if strings.TrimSpace(ev.CorrelationID) != "" {
		keys = append(keys, "events:correlation:"+ev.CorrelationID)
	}
	score := strconv.FormatInt(ev.Timestamp.UnixMilli(), 10)
	ttlSeconds := strconv.FormatInt(int64(ev.TTL/time.Second), 10)
	return keys, []any{ev.Raw, score, ev.EventID, ttlSeconds}, nil
}
