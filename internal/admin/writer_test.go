package admin

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// contractKey is the key of the contract's AES test vector (§4.1).
const contractKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

func newWriter(t *testing.T, encrypted bool) (*Writer, redis.UniversalClient) {
	t.Helper()
	env := testenv.Redis(t)
	var key *proto.SecretKey
	if encrypted {
		var err error
		if key, err = proto.ParseSecretKey(contractKey); err != nil {
			t.Fatal(err)
		}
	}
	return NewWriter(env.Client, key), env.Client
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, w *Writer, s Subscription) string {
	t.Helper()
	id, _, err := w.CreateSubscription(ctxT(t), s)
	if err != nil {
		t.Fatalf("CreateSubscription: %v", err)
	}
	return id
}

func getString(t *testing.T, rdb redis.UniversalClient, key string) string {
	t.Helper()
	v, err := rdb.Get(ctxT(t), key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

func ttl(t *testing.T, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	d, err := rdb.Do(ctxT(t), "TTL", key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCreateSubscription_StoresAdminRecordIndexesAndEncryptedSecret(t *testing.T) {
	w, rdb := newWriter(t, true)
	ctx := ctxT(t)
	s := Subscription{TenantID: "acme-corp", URL: "https://hooks.example.com/cycles", EventTypes: []string{"budget.exhausted"}}
	id, secret, err := w.CreateSubscription(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "whsub_") || !strings.HasPrefix(secret, "whsec_") || len(secret) != 49 {
		t.Fatalf("minted id %q / secret %q do not look like admin's", id, secret)
	}
	raw := getString(t, rdb, "webhook:"+id)
	sub, err := proto.ParseSubscription([]byte(raw))
	if err != nil {
		t.Fatalf("stored record unreadable: %v", err)
	}
	s.ID, s.CreatedAt = id, sub.CreatedAt.Time
	if raw != string(s.JSON()) {
		t.Fatalf("stored record is not the admin serialization\n got: %s\nwant: %s", raw, s.JSON())
	}
	if frac := strings.SplitN(proto.FormatInstant(sub.CreatedAt.Time), ".", 2); len(frac) == 2 && len(frac[1]) > 7 {
		t.Fatalf("created_at %s has more than microsecond precision, which Java's Instant.now() never has", proto.FormatInstant(sub.CreatedAt.Time))
	}
	if got := ttl(t, rdb, "webhook:"+id); got != -1 {
		t.Fatalf("webhook record TTL = %d, want none", got)
	}
	for _, set := range []string{"webhooks:acme-corp", "webhooks:_all"} {
		if ok, _ := rdb.SIsMember(ctx, set, id).Result(); !ok {
			t.Fatalf("%s does not contain %s", set, id)
		}
	}
	stored := getString(t, rdb, "webhook:secret:"+id)
	if !strings.HasPrefix(stored, "enc:") {
		t.Fatalf("secret stored as %q, want enc:…", stored)
	}
	key, _ := proto.ParseSecretKey(contractKey)
	if plain, err := key.Decrypt(stored); err != nil || plain != secret {
		t.Fatalf("decrypt(stored) = %q, %v; want the returned secret %q", plain, err, secret)
	}
}

func TestCreateSubscription_WithoutKeyStoresGivenSecretInPlaintextUnderSystemOwner(t *testing.T) {
	w, rdb := newWriter(t, false)
	id, secret, err := w.CreateSubscription(ctxT(t), Subscription{ID: "whsub_fixed", URL: "http://127.0.0.1:1/h", EventCategories: []string{"system"}, SigningSecret: "whsec_test"})
	if err != nil {
		t.Fatal(err)
	}
	if id != "whsub_fixed" || secret != "whsec_test" {
		t.Fatalf("got %q/%q, want the given id and secret", id, secret)
	}
	if got := getString(t, rdb, "webhook:secret:whsub_fixed"); got != "whsec_test" {
		t.Fatalf("plaintext secret stored as %q", got)
	}
	if ok, _ := rdb.SIsMember(ctxT(t), "webhooks:__system__", id).Result(); !ok {
		t.Fatal("subscription without tenant is not indexed under webhooks:__system__")
	}
}

func TestCreateSubscription_RejectsInvalidInputWithoutWriting(t *testing.T) {
	w, rdb := newWriter(t, false)
	_, _, err := w.CreateSubscription(ctxT(t), Subscription{ID: "whsub_bad", URL: "https://x", EventTypes: []string{"budget.exhausted"}, Headers: map[string]string{"X-A": "1\r\nX-B: 2"}})
	if err == nil {
		t.Fatal("header with CR/LF accepted")
	}
	if n, _ := rdb.Exists(ctxT(t), "webhook:whsub_bad", "webhook:secret:whsub_bad").Result(); n != 0 {
		t.Fatalf("rejected subscription left %d keys behind", n)
	}
}

func TestSaveEvent_WritesRecordIndexesAndCorrelationWithTTLs(t *testing.T) {
	w, rdb := newWriter(t, false)
	ctx := ctxT(t)
	ts := mustInstant(t, "2026-04-01T12:00:00.118Z")
	e := Event{EventType: "budget.exhausted", Timestamp: ts, TenantID: "acme-corp", CorrelationID: "corr-1",
		Data: json.RawMessage("{\n  \"n\": 1.50\n}")}
	id, err := w.SaveEvent(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(id, "evt_") || len(id) != 20 {
		t.Fatalf("minted event id %q", id)
	}
	want := e
	want.EventID, want.Category, want.Source, want.Data = id, "budget", "cycles-admin", json.RawMessage(`{"n":1.50}`)
	if got := getString(t, rdb, "event:"+id); got != string(want.JSON()) {
		t.Fatalf("event record\n got: %s\nwant: %s", got, want.JSON())
	}
	if got := ttl(t, rdb, "event:"+id); got != 7776000 {
		t.Fatalf("event TTL = %d, want 7776000", got)
	}
	for _, z := range []string{"events:acme-corp", "events:_all"} {
		score, err := rdb.ZScore(ctx, z, id).Result()
		if err != nil || int64(score) != ts.UnixMilli() {
			t.Fatalf("%s score = %v (%v), want %d", z, score, err, ts.UnixMilli())
		}
	}
	if ok, _ := rdb.SIsMember(ctx, "events:correlation:corr-1", id).Result(); !ok {
		t.Fatal("correlation set lacks the event")
	}
	if got := ttl(t, rdb, "events:correlation:corr-1"); got != 7776000 {
		t.Fatalf("correlation TTL = %d, want 7776000", got)
	}
}

func TestSaveEvent_NullTenantIndexesUnderEventsNullAndBlankCorrelationIsNotIndexed(t *testing.T) {
	w, rdb := newWriter(t, false)
	ctx := ctxT(t)
	id, err := w.SaveEvent(ctx, Event{EventID: "evt_0000000000000001", EventType: "system.high_latency", CorrelationID: " "})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.ZScore(ctx, "events:null", id).Result(); err != nil {
		t.Fatalf("event without tenant not in events:null: %v", err)
	}
	if keys, _ := rdb.Keys(ctx, "events:correlation:*").Result(); len(keys) != 0 {
		t.Fatalf("blank correlation id created %v", keys)
	}
	if !strings.Contains(getString(t, rdb, "event:"+id), `"tenant_id":null`) {
		t.Fatal("missing tenant not written as null")
	}
}

func TestEmit_EnqueuesOnlyMatchingActiveSubscriptionsOnce(t *testing.T) {
	w, rdb := newWriter(t, false)
	ctx := ctxT(t)
	const url = "http://127.0.0.1:1/hook"
	subs := map[string]Subscription{
		"whsub_type":        {TenantID: "acme", URL: url, EventTypes: []string{"budget.exhausted"}},
		"whsub_category":    {TenantID: "acme", URL: url, EventCategories: []string{"budget"}},
		"whsub_scope":       {TenantID: "acme", URL: url, EventTypes: []string{"budget.exhausted"}, ScopeFilter: "tenant:acme/*"},
		"whsub_system_all":  {URL: url, EventTypes: []string{}, EventCategories: []string{"budget", "system"}},
		"whsub_othertype":   {TenantID: "acme", URL: url, EventTypes: []string{"budget.created"}},
		"whsub_otherscope":  {TenantID: "acme", URL: url, EventTypes: []string{"budget.exhausted"}, ScopeFilter: "tenant:acme/ws:dev"},
		"whsub_paused":      {TenantID: "acme", URL: url, EventTypes: []string{"budget.exhausted"}, Status: proto.SubscriptionPaused},
		"whsub_disabled":    {TenantID: "acme", URL: url, EventTypes: []string{"budget.exhausted"}, Status: proto.SubscriptionDisabled},
		"whsub_othertenant": {TenantID: "globex", URL: url, EventTypes: []string{"budget.exhausted"}},
	}
	for id, s := range subs {
		s.ID = id
		mustCreate(t, w, s)
	}
	// A row admin could no longer write: a concrete tenant subscribed to
	// everything. The fail-closed boundary must still keep admin-only
	// events away from it.
	if err := rdb.Set(ctx, "webhook:whsub_legacy", `{"subscription_id":"whsub_legacy","tenant_id":"acme","url":"`+url+`","event_types":[],"status":"ACTIVE"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.SAdd(ctx, "webhooks:acme", "whsub_legacy", "whsub_gone", "whsub_corrupt")
	rdb.Set(ctx, "webhook:whsub_corrupt", "{not json", 0)

	inbound := false
	trace := TraceSnapshot{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", TraceFlags: "01", InboundValid: &inbound}
	e := Event{EventType: "budget.exhausted", TenantID: "acme", Scope: "tenant:acme/ws:prod"}
	eventID, got, err := w.Emit(ctx, e, trace)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, sub := range []string{"whsub_category", "whsub_legacy", "whsub_scope", "whsub_system_all", "whsub_type"} {
		want = append(want, DeliveryID(eventID, sub))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("enqueued %v, want %v", got, want)
	}
	pending, _ := rdb.LRange(ctx, "dispatch:pending", 0, -1).Result()
	slices.Reverse(pending) // LPUSH: the oldest is at the right
	if !slices.Equal(pending, want) {
		t.Fatalf("dispatch:pending (oldest first) = %v, want %v", pending, want)
	}
	if ev := getString(t, rdb, "event:"+eventID); !strings.Contains(ev, `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
		t.Fatalf("event did not take the request's trace id: %s", ev)
	}
	for _, id := range want {
		raw := getString(t, rdb, "delivery:"+id)
		d, err := proto.ParseDelivery([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		wantRec := Delivery{DeliveryID: id, SubscriptionID: d.SubscriptionID, EventID: eventID, EventType: "budget.exhausted",
			AttemptedAt: d.AttemptedAt.Time, TraceID: trace.TraceID, TraceFlags: "01", TraceparentInboundValid: &inbound}
		if raw != string(wantRec.JSON()) {
			t.Fatalf("delivery record\n got: %s\nwant: %s", raw, wantRec.JSON())
		}
		if got := ttl(t, rdb, "delivery:"+id); got != 1209600 {
			t.Fatalf("delivery TTL = %d, want 1209600", got)
		}
		score, err := rdb.ZScore(ctx, "deliveries:"+d.SubscriptionID, id).Result()
		if err != nil || int64(score) != d.AttemptedAt.UnixMilli() {
			t.Fatalf("deliveries:%s score = %v (%v), want attempted_at %d", d.SubscriptionID, score, err, d.AttemptedAt.UnixMilli())
		}
	}

	// Re-emitting the same event id (an outbox retry) enqueues nothing.
	e.EventID = eventID
	_, again, err := w.Emit(ctx, e, trace)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Fatalf("re-emit enqueued %v", again)
	}
	if n, _ := rdb.LLen(ctx, "dispatch:pending").Result(); n != int64(len(want)) {
		t.Fatalf("dispatch:pending grew to %d on re-emit", n)
	}
}

func TestEmit_AdminOnlyEventReachesOnlySystemSubscriptionsWithOffRequestTrace(t *testing.T) {
	w, rdb := newWriter(t, false)
	ctx := ctxT(t)
	mustCreate(t, w, Subscription{ID: "whsub_sys", URL: "https://x", EventCategories: []string{"api_key"}})
	mustCreate(t, w, Subscription{ID: "whsub_tenant", TenantID: "acme", URL: "https://x", EventTypes: []string{"budget.exhausted"}})
	rdb.Set(ctx, "webhook:whsub_legacy", `{"subscription_id":"whsub_legacy","tenant_id":"acme","url":"https://x","event_types":null,"event_categories":["api_key"],"status":"ACTIVE"}`, 0)
	rdb.SAdd(ctx, "webhooks:acme", "whsub_legacy")

	eventID, got, err := w.Emit(ctx, Event{EventType: "api_key.created", TenantID: "acme", TraceID: "0af7651916cd43dd8448eb211c80319c"}, TraceSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{DeliveryID(eventID, "whsub_sys")}; !slices.Equal(got, want) {
		t.Fatalf("enqueued %v, want only %v", got, want)
	}
	raw := getString(t, rdb, "delivery:"+got[0])
	if !strings.HasSuffix(raw, `"attempts":0,"trace_id":"0af7651916cd43dd8448eb211c80319c"}`) {
		t.Fatalf("off-request delivery should carry only the event's trace_id: %s", raw)
	}
}

func TestEnqueue_IsANoOpTheSecondTimeAndKeepsSeededFields(t *testing.T) {
	w, rdb := newWriter(t, false)
	ctx := ctxT(t)
	stale := time.Now().Add(-25 * time.Hour).UTC().Truncate(time.Millisecond)
	valid := true
	d := Delivery{SubscriptionID: "whsub_a", EventID: "evt_a", EventType: "budget.exhausted", AttemptedAt: stale,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", TraceFlags: "00", TraceparentInboundValid: &valid}
	for i, want := range []bool{true, false} {
		ok, err := w.Enqueue(ctx, d)
		if err != nil || ok != want {
			t.Fatalf("Enqueue #%d = %v, %v; want %v", i+1, ok, err, want)
		}
	}
	id := DeliveryID("evt_a", "whsub_a")
	d.DeliveryID = id
	if got := getString(t, rdb, "delivery:"+id); got != string(d.JSON()) {
		t.Fatalf("\n got: %s\nwant: %s", got, d.JSON())
	}
	if n, _ := rdb.LLen(ctx, "dispatch:pending").Result(); n != 1 {
		t.Fatalf("dispatch:pending has %d entries, want 1", n)
	}
	if score, _ := rdb.ZScore(ctx, "deliveries:whsub_a", id).Result(); int64(score) != stale.UnixMilli() {
		t.Fatalf("deliveries score %v, want %d", score, stale.UnixMilli())
	}
	if _, err := w.Enqueue(ctx, Delivery{EventID: "evt_a"}); err == nil {
		t.Fatal("delivery without subscription accepted")
	}
}

func TestEnqueueRuntimeStyle_WritesRandomIDsWithoutGuard(t *testing.T) {
	w, rdb := newWriter(t, false)
	ctx := ctxT(t)
	d := Delivery{SubscriptionID: "whsub_a", EventID: "evt_a", EventType: "budget.exhausted"}
	id1, err := w.EnqueueRuntimeStyle(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := w.EnqueueRuntimeStyle(ctx, d)
	if id1 == id2 || !strings.HasPrefix(id1, "del_") {
		t.Fatalf("runtime ids %q, %q: want distinct random del_ ids", id1, id2)
	}
	if got := ttl(t, rdb, "delivery:"+id1); got != 1209600 {
		t.Fatalf("delivery TTL = %d", got)
	}
	if n, _ := rdb.ZCard(ctx, "deliveries:whsub_a").Result(); n != 2 {
		t.Fatalf("deliveries:whsub_a has %d members, want 2", n)
	}
	pending, _ := rdb.LRange(ctx, "dispatch:pending", 0, -1).Result()
	if !slices.Equal(pending, []string{id2, id1}) {
		t.Fatalf("dispatch:pending = %v", pending)
	}
	if _, err := proto.ParseDelivery([]byte(getString(t, rdb, "delivery:"+id1))); err != nil {
		t.Fatal(err)
	}
}

func TestSetStatus_FollowsAdminPatchSemantics(t *testing.T) {
	w, rdb := newWriter(t, false)
	ctx := ctxT(t)
	id := mustCreate(t, w, Subscription{TenantID: "acme", URL: "https://x", EventTypes: []string{"budget.exhausted"}, ConsecutiveFailures: 7})
	// As the events service's merge leaves it, plus a field admin does not know.
	raw := getString(t, rdb, "webhook:"+id)
	raw = strings.TrimSuffix(raw, "}") + `,"last_failure_at":"2026-04-01T12:05:00Z","x_owner_note":"keep me"}`
	rdb.Set(ctx, "webhook:"+id, raw, 0)

	read := func() (*proto.Subscription, string) {
		raw := getString(t, rdb, "webhook:"+id)
		s, err := proto.ParseSubscription([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		return s, raw
	}
	before := time.Now().Add(-time.Second)
	if err := w.SetStatus(ctx, id, proto.SubscriptionPaused); err != nil {
		t.Fatal(err)
	}
	s, _ := read()
	if s.Status != proto.SubscriptionPaused || s.ConsecutiveFailures != 7 || s.UpdatedAt == nil || s.UpdatedAt.Before(before) {
		t.Fatalf("after pause: status %s, failures %d, updated_at %v", s.Status, s.ConsecutiveFailures, s.UpdatedAt)
	}
	if err := w.SetStatus(ctx, id, proto.SubscriptionActive); err != nil {
		t.Fatal(err)
	}
	s, raw = read()
	if s.Status != proto.SubscriptionActive || s.ConsecutiveFailures != 0 {
		t.Fatalf("after resume: status %s, failures %d; want ACTIVE, 0", s.Status, s.ConsecutiveFailures)
	}
	upd := strconv.Quote(proto.FormatInstant(s.UpdatedAt.Time))
	if !strings.HasSuffix(raw, `,"created_at":`+strconv.Quote(proto.FormatInstant(s.CreatedAt.Time))+`,"updated_at":`+upd+`,"last_failure_at":"2026-04-01T12:05:00Z","x_owner_note":"keep me"}`) {
		t.Fatalf("record not in admin order with the unknown field kept: %s", raw)
	}
	if err := w.SetStatus(ctx, "whsub_missing", proto.SubscriptionPaused); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("missing subscription: %v, want ErrSubscriptionNotFound", err)
	}
	if err := w.SetStatus(ctx, id, "ENABLED"); err == nil {
		t.Fatal("unknown status accepted")
	}
}

func TestDeleteSubscription_RemovesRecordSecretAndIndexEntries(t *testing.T) {
	w, rdb := newWriter(t, true)
	ctx := ctxT(t)
	id := mustCreate(t, w, Subscription{TenantID: "acme", URL: "https://x", EventTypes: []string{"budget.exhausted"}})
	if err := w.DeleteSubscription(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, "webhook:"+id, "webhook:secret:"+id).Result(); n != 0 {
		t.Fatalf("%d keys left after delete", n)
	}
	for _, set := range []string{"webhooks:acme", "webhooks:_all"} {
		if ok, _ := rdb.SIsMember(ctx, set, id).Result(); ok {
			t.Fatalf("%s still lists %s", set, id)
		}
	}
	if err := w.DeleteSubscription(ctx, id); !errors.Is(err, ErrSubscriptionNotFound) {
		t.Fatalf("second delete: %v, want ErrSubscriptionNotFound", err)
	}
}

// enqueueWatch records, for every command admin sends, when it was sent
// and when its answer came, and which delivery an enqueue was for.
type enqueueWatch struct {
	mu   sync.Mutex
	cmds []watchedCmd
}

type watchedCmd struct {
	delivery   string // the enqueue's delivery key, "" for other commands
	sent, done time.Time
}

func (h *enqueueWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *enqueueWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		var delivery string
		if isEnqueue(cmd) {
			delivery = strings.TrimPrefix(argString(cmd.Args()[3]), "delivery:")
		}
		return h.watch(delivery, func() error { return next(ctx, cmd) })
	}
}

func (h *enqueueWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.watch("", func() error { return next(ctx, cmds) })
	}
}

// watch runs send and records when it began and when it returned.
func (h *enqueueWatch) watch(delivery string, send func() error) error {
	c := watchedCmd{delivery: delivery, sent: time.Now()}
	err := send()
	c.done = time.Now()
	h.mu.Lock()
	h.cmds = append(h.cmds, c)
	h.mu.Unlock()
	return err
}

// isEnqueue: SaveAndEnqueueOnceLua, whose first key is a delivery record.
func isEnqueue(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) > 3 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") && strings.HasPrefix(argString(args[3]), "delivery:")
}

func argString(v any) string { s, _ := v.(string); return s }

// Each delivery's enqueue time is after every command admin sent before it
// (the event's save, the subscription reads, the enqueues of the
// deliveries before it) and before its own enqueue was sent.
func TestEmitTimed_EachEnqueueTimeIsAfterAdminsWritesBeforeItAndBeforeItsEnqueue(t *testing.T) {
	w, rdb := newWriter(t, false)
	ctx := ctxT(t)
	for _, id := range []string{"whsub_a", "whsub_b", "whsub_c"} {
		mustCreate(t, w, Subscription{ID: id, TenantID: "acme", URL: "https://x", EventTypes: []string{"budget.exhausted"}})
	}
	watch := &enqueueWatch{}
	rdb.(*redis.Client).AddHook(watch)

	e := Event{EventID: "evt_timed", EventType: "budget.exhausted", TenantID: "acme"}
	_, queued, err := w.EmitTimed(ctx, e, TraceSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) != 3 {
		t.Fatalf("enqueued %v, want the three subscriptions' deliveries", queued)
	}
	watch.mu.Lock()
	cmds := slices.Clone(watch.cmds)
	watch.mu.Unlock()
	for _, q := range queued {
		own := slices.IndexFunc(cmds, func(c watchedCmd) bool { return c.delivery == q.DeliveryID })
		if own < 1 {
			t.Fatalf("the hook saw no enqueue of %s after admin's reads: %+v", q.DeliveryID, cmds)
		}
		if before := cmds[own-1]; q.At.Before(before.done) {
			t.Errorf("%s: enqueue time %v is before the answer to the command sent before it (%v)", q.DeliveryID, q.At, before.done)
		}
		if q.At.After(cmds[own].sent) {
			t.Errorf("%s: enqueue time %v is after its enqueue was sent (%v)", q.DeliveryID, q.At, cmds[own].sent)
		}
	}
	if !slices.IsSortedFunc(queued, func(a, b Queued) int { return a.At.Compare(b.At) }) {
		t.Errorf("enqueue times out of order: %v", queued)
	}

	// The same event again enqueues nothing.
	_, queued, err = w.EmitTimed(ctx, e, TraceSnapshot{})
	if err != nil || len(queued) != 0 {
		t.Fatalf("re-emit: %v, err %v; want nothing enqueued", queued, err)
	}
}
