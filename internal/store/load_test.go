package store

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/proto"
)

const evtID = "evt_5d7e9f1a3b5c7d9e"

const storedEvent = `{"event_id":"evt_5d7e9f1a3b5c7d9e","event_type":"budget.exhausted","category":"budget","timestamp":"2026-04-01T12:00:00.128Z","tenant_id":"acme-corp","source":"cycles-admin","data":{"remaining":1.50}}`

var loadDelivery = &proto.Delivery{DeliveryID: delID, EventID: evtID, SubscriptionID: subID}

// roundTrips records the keys each round trip a client makes reads with GET
// or MGET (connection handshakes, which go through the same hooks, carry none
// and are skipped).
type roundTrips struct{ gets [][]string }

func (r *roundTrips) record(cmds []redis.Cmder) {
	var gets []string
	for _, c := range cmds {
		switch c.Name() {
		case "get":
			gets = append(gets, c.Args()[1].(string))
		case "mget":
			for _, k := range c.Args()[1:] {
				gets = append(gets, k.(string))
			}
		}
	}
	if len(gets) > 0 {
		r.gets = append(r.gets, gets)
	}
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.record(cmds)
		return next(ctx, cmds)
	}
}

// otherClient is a redis.UniversalClient that is not a *redis.Client (as a
// cluster or failover client is not): the store then pipelines per call
// instead of going through the autopipeliner.
type otherClient struct{ *redis.Client }

func TestLoad_FetchesEventSubscriptionSecretAndSettingsInOneRoundTrip(t *testing.T) {
	t.Run("autopipelined", func(t *testing.T) {
		st, c, _ := newStore(t)
		if st.hot == nil {
			t.Fatal("a plain client's store has no autopipeliner")
		}
		testLoadInOneRoundTrip(t, st, c)
	})
	t.Run("pipelined per call", func(t *testing.T) {
		_, c, _ := newStore(t)
		st := New(otherClient{c})
		if st.hot != nil {
			t.Fatal("the store autopipelines a client that is not a *redis.Client")
		}
		testLoadInOneRoundTrip(t, st, c)
	})
	t.Run("autopipelining switched off", func(t *testing.T) {
		_, c, _ := newStore(t)
		st := NewWithOptions(c, Options{})
		if st.hot != nil {
			t.Fatal("the store autopipelines although told not to")
		}
		testLoadInOneRoundTrip(t, st, c)
	})
}

func testLoadInOneRoundTrip(t *testing.T, st *Store, c *redis.Client) {
	mustSet(t, c, EventKey(evtID), storedEvent)
	mustSet(t, c, SubscriptionKey(subID), adminSub)
	mustSet(t, c, SecretKey(subID), "enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd5kdFcPheIhlCI483dCw=")
	trips := &roundTrips{}
	c.AddHook(trips)

	b, err := st.Load(context.Background(), loadDelivery)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	// Four keys (the settings record absent, as for most subscriptions),
	// in one round trip: an absent settings record costs no second look.
	if len(trips.gets) != 1 || len(trips.gets[0]) != 4 {
		t.Errorf("Load's GETs per round trip = %v, want all four in one", trips.gets)
	}
	if b.EventErr != nil || string(b.EventRaw) != storedEvent || b.Event.EventType != "budget.exhausted" {
		t.Errorf("event = %s, %+v, err %v", b.EventRaw, b.Event, b.EventErr)
	}
	if b.SubscriptionErr != nil || string(b.SubscriptionRaw) != adminSub || b.Subscription.URL != "https://hooks.example.com/cycles" {
		t.Errorf("subscription = %s, err %v", b.SubscriptionRaw, b.SubscriptionErr)
	}
	if !b.HasSecret || b.Secret != "enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd5kdFcPheIhlCI483dCw=" {
		t.Errorf("secret = %q (present %v), want the stored enc: value untouched", b.Secret, b.HasSecret)
	}
}

func TestLoad_ReportsMissingAndCorruptRecordsPerField(t *testing.T) {
	tests := []struct {
		name            string
		event, sub      string // "" = absent
		secret          string
		wantEvent       error
		wantSub         error
		wantHasSecret   bool
		wantBlankSecret bool
	}{
		{"nothing stored", "", "", "", ErrNotFound, ErrNotFound, false, false},
		{"corrupt event, missing subscription", `{"event_id":`, "", "", ErrCorrupt, ErrNotFound, false, false},
		{"event fine, subscription wrong type, blank secret", storedEvent, `{"event_types":"all"}`, " ", nil, ErrCorrupt, true, true},
	}
	st, c, _ := newStore(t)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.FlushAll(ctx)
			for key, v := range map[string]string{EventKey(evtID): tt.event, SubscriptionKey(subID): tt.sub, SecretKey(subID): tt.secret} {
				if v != "" {
					mustSet(t, c, key, v)
				}
			}
			b, err := st.Load(ctx, loadDelivery)
			if err != nil {
				t.Fatalf("Load: %v (a missing or corrupt record is not an infrastructure failure)", err)
			}
			if !errors.Is(b.EventErr, tt.wantEvent) || (tt.wantEvent == nil) != (b.EventErr == nil) {
				t.Errorf("EventErr = %v, want %v", b.EventErr, tt.wantEvent)
			}
			if !errors.Is(b.SubscriptionErr, tt.wantSub) || (tt.wantSub == nil) != (b.SubscriptionErr == nil) {
				t.Errorf("SubscriptionErr = %v, want %v", b.SubscriptionErr, tt.wantSub)
			}
			if b.HasSecret != tt.wantHasSecret {
				t.Errorf("HasSecret = %v, want %v", b.HasSecret, tt.wantHasSecret)
			}
		})
	}
}

func TestLoad_SecretThatCannotBeReadFailsClosed(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	mustSet(t, c, EventKey(evtID), storedEvent)
	mustSet(t, c, SubscriptionKey(subID), adminSub)
	c.SAdd(ctx, SecretKey(subID), "whsec_test")

	_, err := st.Load(ctx, loadDelivery)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load err = %v, want a corrupt secret error rather than a bundle without a secret", err)
	}
}

func TestLoadAndDelivery_FailWithTheRedisErrorWhenRedisIsDown(t *testing.T) {
	st, c, env := newStore(t)
	mustSet(t, c, EventKey(evtID), storedEvent)
	if err := env.Server.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()

	_, loadErr := st.Load(ctx, loadDelivery)
	_, readErr := st.Delivery(ctx, delID)
	for op, err := range map[string]error{"Load": loadErr, "Delivery": readErr} {
		if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s err = %v, want an infrastructure error", op, err)
		}
		var netErr net.Error
		if !errors.As(err, &netErr) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s err = %v does not wrap the network error", op, err)
		}
	}
	if err := st.Ping(ctx); err == nil {
		t.Error("Ping succeeded with Redis down")
	}
}

func TestDeliveryAndLoad_ReadsTheDeliveryAndItsRecordsInOneRoundTrip(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	setDeliveryRecords(t, c)
	mustSet(t, c, SecretKey(subID), "enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd5kdFcPheIhlCI483dCw=")
	trips := &roundTrips{}
	c.AddHook(trips)

	rec, pre, err := st.DeliveryAndLoad(ctx, delID, evtID, subID)
	if err != nil || pre == nil {
		t.Fatalf("DeliveryAndLoad = %v, prefetched %v", err, pre != nil)
	}
	if len(trips.gets) != 1 || len(trips.gets[0]) != 5 {
		t.Errorf("GETs per round trip = %v, want the delivery and Load's four keys in one", trips.gets)
	}
	if string(rec.Raw) != pendingDelivery || rec.SubscriptionID != subID {
		t.Errorf("delivery = %s", rec.Raw)
	}
	b, err := pre.Bundle()
	if err != nil {
		t.Fatalf("Bundle: %v", err)
	}
	want, err := st.Load(ctx, rec.Delivery)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if string(b.EventRaw) != string(want.EventRaw) || string(b.SubscriptionRaw) != string(want.SubscriptionRaw) ||
		b.Secret != want.Secret || b.HasSecret != want.HasSecret || b.Subscription.URL != want.Subscription.URL {
		t.Errorf("prefetched bundle %+v differs from Load's %+v", b, want)
	}
}

func TestDeliveryAndLoad_IgnoresIdsTheRecordDoesNotName(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	mustSet(t, c, DeliveryKey(delID), pendingDelivery)
	mustSet(t, c, SubscriptionKey("whsub_other"), adminSub)

	rec, pre, err := st.DeliveryAndLoad(ctx, delID, evtID, "whsub_other")
	if err != nil || rec == nil || rec.SubscriptionID != subID {
		t.Fatalf("DeliveryAndLoad = %+v, %v; want the delivery record", rec, err)
	}
	if pre != nil {
		t.Error("the records of a subscription the delivery does not name were handed out as its own")
	}
	if _, _, err := st.DeliveryAndLoad(ctx, "del_gone", evtID, subID); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing delivery: err = %v, want ErrNotFound", err)
	}
}

// The record bytes read returns are the caller's, as a copy would be: read
// takes them out of go-redis's reply without copying (replyBytes), so
// writing into one caller's bytes must change neither another caller's,
// read in the same autopipelined reply, nor the next read's.
func TestRead_RecordBytesAreTheCallers(t *testing.T) {
	st, c, _ := newStore(t)
	ctx := context.Background()
	setDeliveryRecords(t, c)

	// Readers in parallel share the autopipeliner's round trips.
	const readers = 16
	recs := make([]*DeliveryRecord, readers)
	bundles := make([]*Bundle, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			rec, pre, err := st.DeliveryAndLoad(ctx, delID, evtID, subID)
			if err != nil || pre == nil {
				t.Errorf("DeliveryAndLoad = %v, prefetched %v", err, pre != nil)
				return
			}
			b, err := pre.Bundle()
			if err != nil {
				t.Errorf("Bundle: %v", err)
				return
			}
			recs[i], bundles[i] = rec, b
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i := 1; i < readers; i++ {
		clear(recs[i].Raw)
		clear(bundles[i].EventRaw)
		clear(bundles[i].SubscriptionRaw)
	}
	if string(recs[0].Raw) != pendingDelivery || string(bundles[0].EventRaw) != storedEvent || string(bundles[0].SubscriptionRaw) != adminSub {
		t.Errorf("a reader's record bytes changed when other readers wrote into theirs: %q", recs[0].Raw)
	}
	rec, pre, err := st.DeliveryAndLoad(ctx, delID, evtID, subID)
	if err != nil || pre == nil {
		t.Fatalf("DeliveryAndLoad again = %v", err)
	}
	b, err := pre.Bundle()
	if err != nil {
		t.Fatalf("Bundle again: %v", err)
	}
	if string(rec.Raw) != pendingDelivery || string(b.EventRaw) != storedEvent {
		t.Errorf("the next read's bytes changed when earlier readers wrote into theirs: %q", rec.Raw)
	}
}

// setDeliveryRecords writes the delivery, its event and its subscription
// as admin stores them.
func setDeliveryRecords(t *testing.T, c *redis.Client) {
	t.Helper()
	mustSet(t, c, DeliveryKey(delID), pendingDelivery)
	mustSet(t, c, EventKey(evtID), storedEvent)
	mustSet(t, c, SubscriptionKey(subID), adminSub)
}
