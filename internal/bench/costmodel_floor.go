package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// floor is one step measured alone, with its real code against the real
// servers of the profiled run, one operation after another: what the step
// costs with nothing else running, per delivery.
type floor struct {
	us, redisUS float64 // this process's CPU and redis-server's, µs per delivery
	how         string
	// group names a measurement that gives several steps their floors at
	// once (the queue alone); how is then the group's.
	group string
	// sampled: us comes from a profile's share of samples (the group's),
	// of which this step had samples; fewer than minFloorSamples tell
	// nothing.
	sampled bool
	samples int64
}

// known reports whether f measured its step: timed, or from enough
// samples.
func (f floor) known() bool { return !f.sampled || f.samples >= minFloorSamples }

// floorOps is how many times a step is repeated for its floor.
const floorOps = 5000

// measureFloors times, after the drain, the steps that can run alone:
// signing, JSON, the Redis reads and the outcome write (unbatched: one
// round trip per call), a bare POST (the engine's own webhook transport,
// no queue) and the queue alone (queueFloor).
func measureFloors(ctx context.Context, b *benchContext, env *benchEnv, f *fleet, load *emitted) (map[string]floor, error) {
	b.stepf("  floors: each step alone, %d times", floorOps)
	if len(load.deliveries) == 0 {
		return nil, errors.New("no deliveries")
	}
	unbatched := store.NewWithOptions(env.adminDB, store.Options{})
	rec, err := unbatched.Delivery(ctx, load.deliveries[0])
	if err != nil {
		return nil, err
	}
	bundle, err := unbatched.Load(ctx, rec.Delivery)
	if err != nil {
		return nil, err
	}
	secret, err := env.key.Decrypt(bundle.Secret)
	if err != nil {
		return nil, err
	}
	out := map[string]floor{}
	timedN := func(step, how string, n int, op func(i int) error) error {
		r0, u0 := env.redisCPU(ctx), resourcesNow()
		for i := range n {
			if err := op(i); err != nil {
				return fmt.Errorf("%s: %w", step, err)
			}
		}
		u1, r1 := resourcesNow(), env.redisCPU(ctx)
		out[step] = floor{us: perDelivery(u1.cpu-u0.cpu, n), redisUS: perDelivery(r1-r0, n), how: how}
		return nil
	}
	timed := func(step, how string, op func(i int) error) error { return timedN(step, how, floorOps, op) }
	sig := ""
	if err := timed("signing", fmt.Sprintf("proto.Sign over the %d-byte stored event", len(bundle.EventRaw)), func(int) error {
		sig = proto.Sign(secret, bundle.EventRaw)
		return nil
	}); err != nil {
		return nil, err
	}
	_ = sig
	if err := timed("secret decryption", "SecretKey.Decrypt of the stored enc: secret", func(int) error {
		_, err := env.key.Decrypt(bundle.Secret)
		return err
	}); err != nil {
		return nil, err
	}
	if err := timed("JSON", "proto.ParseDelivery + ParseEvent + ParseSubscription of the run's records", func(int) error {
		if _, err := proto.ParseDelivery(rec.Raw); err != nil {
			return err
		}
		if _, err := proto.ParseEvent(bundle.EventRaw); err != nil {
			return err
		}
		_, err := proto.ParseSubscription(bundle.SubscriptionRaw)
		return err
	}); err != nil {
		return nil, err
	}
	// The engine reads with the ids its work items' headers name (the
	// bridge's route): they are read here first, outside the timing.
	routes := make([]queue.Route, min(len(load.deliveries), floorOps))
	for i := range routes {
		r, err := unbatched.Delivery(ctx, load.deliveries[i])
		if err != nil {
			return nil, err
		}
		routes[i] = queue.Route{SubscriptionID: r.SubscriptionID, EventID: r.EventID}
	}
	if err := timed("Redis reads", "store.DeliveryAndLoad (one MGET of delivery, event, subscription, secret, settings, the ids from the work item's headers), parsing included, without the autopipeliner: one round trip", func(i int) error {
		i %= len(routes)
		_, pre, err := unbatched.DeliveryAndLoad(ctx, load.deliveries[i], routes[i].EventID, routes[i].SubscriptionID)
		if err != nil {
			return err
		}
		if pre == nil {
			return errors.New("the delivery record names other ids than it did a moment ago")
		}
		_, err = pre.Bundle()
		return err
	}); err != nil {
		return nil, err
	}
	// The outcome of a success, written over each delivery record the drain
	// finished (read first, outside the timing), once per record: the
	// compare-and-set holds, as it does for a delivery's one outcome.
	recs := make([]*store.DeliveryRecord, min(len(load.deliveries), floorOps))
	for i := range recs {
		if recs[i], err = unbatched.Delivery(ctx, load.deliveries[i]); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	success := func(*proto.Delivery, *proto.Subscription) (store.Patch, store.Patch, error) {
		return store.Patch{{Name: "status", Value: proto.DeliverySuccess}, {Name: "completed_at", Value: now},
			{Name: "error_message", Value: nil}, {Name: "next_retry_at", Value: nil}}, nil, nil
	}
	if err := timedN("outcome write", "store.RecordOutcome of a success (status, completed_at, error_message, next_retry_at) over each finished delivery's record as read, the subscription's record unchanged, without the autopipeliner: one script call (EVALSHA) and round trip, its patch and its parsing included (in the drain the round trip is the autopipeliner's step and the parsing JSON's)", len(recs), func(i int) error {
		wrote, err := unbatched.RecordOutcome(ctx, recs[i], nil, success)
		if err == nil && !wrote {
			err = errors.New("nothing written")
		}
		return err
	}); err != nil {
		return nil, err
	}
	post, err := barePOST(ctx, env, f, bundle.EventRaw)
	if err != nil {
		return nil, err
	}
	out["POST (client side)"] = post
	// The queue alone: as many work items as the drain had, 1,000 at least
	// and 20,000 at most (enough samples for its steps without lengthening
	// the run much; a step with too few gets no floor).
	queued, err := queueFloor(ctx, env.stack.JetStream(), min(max(len(load.deliveries), 1000), 20000))
	if err != nil {
		return nil, fmt.Errorf("the queue alone: %w", err)
	}
	for k, v := range queued {
		v.group = "the queue alone"
		out[k] = v
	}
	return out, nil
}

// barePOST is the engine's webhook transport POSTing the stored event to
// the same receiver from as many goroutines as the pool's floor, for
// two seconds, under a profile that tells the client's samples from the
// receiver's.
func barePOST(ctx context.Context, env *benchEnv, f *fleet, body []byte) (floor, error) {
	// As many as the pool's floor: what a fast receiver's drain runs (the
	// pool grows only when work is held back), and the ceiling's count.
	// With the pool's cap (4,096) each POST cost about twice the CPU
	// (113 µs against 59, both ends), most of it scheduling goroutines.
	workers := min(env.cfg.MinWorkers, env.cfg.Workers)
	prof := startCaseProfile()
	u0 := resourcesNow()
	deadline := u0.at.Add(2 * time.Second)
	var (
		mu   sync.Mutex
		sent int
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			lat, _ := ceilingWorker(ctx, env.stack.Webhook(), f, body, w, workers, deadline)
			mu.Lock()
			sent += len(lat)
			mu.Unlock()
		})
	}
	wg.Wait()
	u1 := resourcesNow()
	ps := prof.stopBy(costStepOf)
	if ps == nil || sent == 0 {
		return floor{}, errors.New("bare POST: no profile or nothing sent")
	}
	client := float64(ps.components["POST (client side)"]) / float64(ps.samples)
	return floor{us: client * perDelivery(u1.cpu-u0.cpu, sent),
		how: fmt.Sprintf("the engine's webhook transport alone, %d workers for 2 s (%d POSTs, %.0f µs per POST with both ends; the client's share of the profile; signing is its own step)",
			workers, sent, perDelivery(u1.cpu-u0.cpu, sent))}, nil
}
