package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// emission says which events the load generator emits and how fast.
type emission struct {
	tenant    string
	tenants   []string        // if set, the events go to these tenants in turn instead of tenant
	data      json.RawMessage // the events' data; nil: a small budget.exhausted payload
	eventType string
	// eventTypes, if set, go to the events in turn instead of eventType
	// (interleaved: event n has eventTypes[n % len]).
	eventTypes []string
	events     int
	every      time.Duration // time between two events' start; 0: as fast as the workers go
	workers    int           // concurrent emitters (admin's request threads)
}

// emitted is what the load generator wrote, as admin reported it.
type emitted struct {
	mu         sync.Mutex
	at         map[string]time.Time // event id → when its Emit began
	enqueued   map[string]time.Time // delivery id → when its enqueue (SaveAndEnqueueOnceLua) was sent
	deliveries []string             // delivery ids admin enqueued
	first      time.Time            // first Emit began
	maxLag     time.Duration        // worst delay of an Emit behind its schedule
}

func newEmitted() *emitted {
	return &emitted{at: make(map[string]time.Time), enqueued: make(map[string]time.Time)}
}

// emit writes spec.events events with admin's Emit (SAVE_EVENT_LUA, then
// SAVE_AND_ENQUEUE_ONCE_LUA and LPUSH dispatch:pending for every matching
// subscription) on a fixed schedule. The schedule is open loop: a slow Emit
// does not push the next one back, and the worst lag behind the schedule is
// recorded so a generator that could not keep up is visible.
func emit(ctx context.Context, w *admin.Writer, spec emission, into *emitted) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type slot struct {
		n  int
		at time.Time
	}
	due := make(chan slot, spec.workers)
	var wg sync.WaitGroup
	for range max(1, spec.workers) {
		wg.Go(func() {
			for d := range due {
				if err := emitOne(ctx, w, spec, d.n, d.at, into); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	start := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
schedule:
	for i := range spec.events {
		at := start.Add(time.Duration(i) * spec.every)
		if wait := time.Until(at); wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				break schedule
			case <-t.C:
			}
		}
		select {
		case due <- slot{i, at}:
		case <-ctx.Done():
			break schedule
		}
	}
	close(due)
	wg.Wait()
	return context.Cause(ctx)
}

func emitOne(ctx context.Context, w *admin.Writer, spec emission, n int, due time.Time, into *emitted) error {
	began := time.Now()
	tenant := spec.tenant
	if len(spec.tenants) > 0 {
		tenant = spec.tenants[n%len(spec.tenants)]
	}
	eventType := spec.eventType
	if len(spec.eventTypes) > 0 {
		eventType = spec.eventTypes[n%len(spec.eventTypes)]
	}
	data := spec.data
	if data == nil {
		data = json.RawMessage(`{"ledger_id":"led_bench","unit":"TOKENS","allocated":10000,"remaining":0,"spent":10000}`)
	}
	ev := admin.Event{
		EventType: eventType, TenantID: tenant, Scope: "tenant:" + tenant + "/workspace:bench",
		Actor: &proto.Actor{Type: "api_key", KeyID: "key_bench"}, Source: "cycles-server",
		Data: data, TraceID: proto.NewTraceID(),
	}
	id, queued, err := w.EmitTimed(ctx, ev, admin.TraceSnapshot{})
	if err != nil {
		return fmt.Errorf("emit %s: %w", eventType, err)
	}
	into.mu.Lock()
	defer into.mu.Unlock()
	into.at[id] = began
	for _, q := range queued {
		into.enqueued[q.DeliveryID] = q.At
		into.deliveries = append(into.deliveries, q.DeliveryID)
	}
	if into.first.IsZero() || began.Before(into.first) {
		into.first = began
	}
	if spec.every > 0 {
		into.maxLag = max(into.maxLag, began.Sub(due))
	}
	return nil
}

// deliveryRecords reads delivery records in batches (MGET); a missing or
// unreadable record is left out.
func deliveryRecords(ctx context.Context, rdb *redis.Client, ids []string) ([]*proto.Delivery, error) {
	var out []*proto.Delivery
	for batch := range slices.Chunk(ids, 1000) {
		keys := make([]string, len(batch))
		for i, id := range batch {
			keys[i] = store.DeliveryKey(id)
		}
		vals, err := rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue
			}
			if d, err := proto.ParseDelivery([]byte(s)); err == nil {
				out = append(out, d)
			}
		}
	}
	return out, nil
}

// parked counts how many of ids wait in JetStream now (a wake-up or held),
// as their records say (jetrelay_waiting).
func parked(ctx context.Context, rdb *redis.Client, ids []string) (int, error) {
	n := 0
	err := eachDelivery(ctx, rdb, ids, func(_ string, raw string) error {
		if d, err := proto.ParseDelivery([]byte(raw)); err == nil && !d.Status.Terminal() && d.Waiting != nil {
			n++
		}
		return nil
	})
	return n, err
}

// eachDelivery calls fn with the stored record of each of ids that has
// one, reading them in MGETs of 1000.
func eachDelivery(ctx context.Context, rdb *redis.Client, ids []string, fn func(id, raw string) error) error {
	for batch := range slices.Chunk(ids, 1000) {
		keys := make([]string, len(batch))
		for i, id := range batch {
			keys[i] = store.DeliveryKey(id)
		}
		vals, err := rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return fmt.Errorf("read deliveries: %w", err)
		}
		for i, v := range vals {
			if raw, ok := v.(string); ok {
				if err := fn(batch[i], raw); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
