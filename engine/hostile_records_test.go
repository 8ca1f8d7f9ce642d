package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Records written by something other than admin, or by a hostile writer:
// each must end in a clear, recorded outcome, never a send it should not
// make, a header injection, a crash or a hang.

// hostileEvent is a well-formed event record with fields replaced or added
// by set (nil values delete a field).
func hostileEvent(t *testing.T, id string, set map[string]any) string {
	t.Helper()
	ev := map[string]any{
		"event_id": id, "event_type": "budget.exhausted", "category": "budget",
		"timestamp": "2026-04-01T12:00:00.128Z", "tenant_id": "acme-corp", "source": "cycles-server",
		"data": map[string]any{"remaining": 0},
	}
	for k, v := range set {
		if v == nil {
			delete(ev, k)
		} else {
			ev[k] = v
		}
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// pad grows a JSON object record to size bytes with a filler field.
func pad(record string, size int) string {
	filler := size - len(record) - len(`,"pad":""`)
	return strings.TrimSuffix(record, "}") + `,"pad":"` + strings.Repeat("x", filler) + `"}`
}

// enqueueRaw stores a delivery record exactly as given and pushes its id
// onto dispatch:pending, as a writer that bypasses admin would.
func (e *env) enqueueRaw(t *testing.T, id, record string) {
	t.Helper()
	ctx := context.Background()
	if err := e.redis.Client.Set(ctx, store.DeliveryKey(id), record, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.redis.Client.LPush(ctx, store.PendingList, id).Err(); err != nil {
		t.Fatal(err)
	}
}

// deliveryJSON is a fresh PENDING delivery record of event to sub.
func deliveryJSON(id, sub, event string) string {
	return string(admin.Delivery{DeliveryID: id, SubscriptionID: sub, EventID: event, EventType: "budget.exhausted", AttemptedAt: time.Now()}.JSON())
}

// rewriteSubscription sets fields of webhook:{id} directly, past admin's
// validation, as a hostile or buggy writer would.
func (e *env) rewriteSubscription(t *testing.T, id string, set map[string]any) {
	t.Helper()
	ctx := context.Background()
	var rec map[string]any
	if err := json.Unmarshal([]byte(e.redis.Client.Get(ctx, store.SubscriptionKey(id)).Val()), &rec); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		rec[k] = v
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.redis.Client.Set(ctx, store.SubscriptionKey(id), raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// quarantined returns the dispatch:failed entries, decoded.
func (e *env) quarantined(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := e.redis.Client.LRange(context.Background(), store.FailedList, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, r := range raw {
		var m map[string]any
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			t.Fatalf("dispatch:failed entry is not JSON: %.200s", r)
		}
		out = append(out, m)
	}
	return out
}

// failedWith asserts delivery id ended FAILED, without an attempt when
// sent is false, with an error_message containing want.
func (e *env) failedWith(t *testing.T, name, id, want string, sent bool) {
	t.Helper()
	rec := e.final(t, id)
	switch {
	case rec.Status != proto.DeliveryFailed || rec.ErrorMessage == nil || rec.CompletedAt == nil:
		t.Errorf("%s: record = %.300s, want FAILED with an error_message", name, rec.Raw)
	case !strings.Contains(*rec.ErrorMessage, want):
		t.Errorf("%s: error_message = %q, want it to say %q", name, *rec.ErrorMessage, want)
	case !sent && rec.Attempts != 0:
		t.Errorf("%s: attempts = %d, want none for a record that is itself bad", name, rec.Attempts)
	}
}

// keptForRecovery asserts that deliveries whose event or subscription
// record cannot be read are neither sent nor failed while JetStream brings
// them back: like upstream since 0.1.25.18 they wait for the record to be
// repaired (or for the stale cutoff) instead of ending as "not found".
func (e *env) keptForRecovery(t *testing.T, ids map[string]string) {
	t.Helper()
	ctx := context.Background()
	pending := make([]string, 0, len(ids))
	for _, id := range ids {
		pending = append(pending, id)
	}
	// A record kept for recovery waits as a JetStream wake-up to be read again.
	waitFor(t, 20*time.Second, "the deliveries to wait as wake-ups to be tried again", func() bool {
		return e.allScheduled(pending)
	})
	for name, id := range ids {
		rec, err := e.store.Delivery(ctx, id)
		if err != nil || rec.Status.Terminal() || rec.Attempts != 0 {
			t.Errorf("%s: record = %v (%v), want it kept unsent for recovery", name, rec, err)
		}
	}
}

// awaitQuarantined waits until every id has an entry in dispatch:failed and
// returns each one's reason.
func (e *env) awaitQuarantined(t *testing.T, ids ...string) map[string]map[string]any {
	t.Helper()
	got := map[string]map[string]any{}
	waitFor(t, 20*time.Second, "the unreadable delivery records in dispatch:failed", func() bool {
		for _, q := range e.quarantined(t) {
			got[fmt.Sprint(q["delivery_id"])] = q
		}
		for _, id := range ids {
			if got[id] == nil {
				return false
			}
		}
		return true
	})
	return got
}

func TestHostileRecords_OversizedRecordsAreKeptOrQuarantinedAndNeverSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/big", receiver.Healthy(), nil)
	ctx := context.Background()

	// A 5 MB event: the body it would be sent as is over store.MaxEventRecord.
	bigEvent := "evt_big0000000000001"
	e.redis.Client.Set(ctx, store.EventKey(bigEvent), pad(hostileEvent(t, bigEvent, nil), 5<<20), time.Hour)
	eventDel := e.deliver(t, sub, admin.Event{EventID: bigEvent}, nil)

	// A 2 MB subscription record.
	bigSub, _, bigEP := e.subscribe(t, "/big-sub", receiver.Healthy(), nil)
	subRaw := e.redis.Client.Get(ctx, store.SubscriptionKey(bigSub)).Val()
	e.redis.Client.Set(ctx, store.SubscriptionKey(bigSub), pad(subRaw, 2<<20), 0)
	subDel := e.deliver(t, bigSub, e.event(), nil)

	// A 2 MB delivery record of an otherwise deliverable event.
	ev := e.event()
	evID, err := e.admin.SaveEvent(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	e.enqueueRaw(t, "del_big0000000000001", pad(deliveryJSON("del_big0000000000001", sub, evID), 2<<20))

	e.keptForRecovery(t, map[string]string{"5 MB event": eventDel, "2 MB subscription": subDel})
	q := e.awaitQuarantined(t, "del_big0000000000001")["del_big0000000000001"]
	if payload, _ := q["payload"].(string); q["reason"] != "corrupt_record" || len(payload) > 64<<10 {
		t.Errorf("2 MB delivery quarantined as %v with a %d-byte payload, want corrupt_record cut to 64 KiB", q["reason"], len(payload))
	}
	if rec := e.rawDelivery(t, "del_big0000000000001"); !strings.Contains(rec[:200], `"status":"PENDING"`) {
		t.Errorf("the oversized delivery record was rewritten: %.200s", rec)
	}
	if n := ep.Stats().Requests + bigEP.Stats().Requests; n != 0 {
		t.Errorf("%d sends of oversized records, want none", n)
	}
}

func TestHostileRecords_TruncatedMistypedAndNonObjectRecordsAreKeptOrQuarantined(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/bad", receiver.Healthy(), nil)
	ctx := context.Background()

	n := 0
	badEvent := func(raw string) string {
		n++
		id := fmt.Sprintf("evt_bad%013d", n)
		e.redis.Client.Set(ctx, store.EventKey(id), raw, time.Hour)
		return e.deliver(t, sub, admin.Event{EventID: id}, nil)
	}
	badSub := func(raw string) string {
		id, _, _ := e.subscribe(t, "/unused", receiver.Healthy(), nil)
		e.redis.Client.Set(ctx, store.SubscriptionKey(id), raw, 0)
		return e.deliver(t, id, e.event(), nil)
	}
	kept := map[string]string{}
	for _, c := range []struct{ name, raw string }{
		{"truncated event", `{"event_id":"evt_x","event_type":"budget.exh`},
		{"event_type a number", `{"event_id":"evt_x","event_type":5}`},
		{"event a JSON array", `[1,2,3]`},
		{"event JSON null", `null`},
		{"event with a NUL byte outside any string", "{\"event_id\":\"evt_x\"\x00}"},
	} {
		kept[c.name] = badEvent(c.raw)
	}
	for _, c := range []struct{ name, raw string }{
		{"truncated subscription", `{"subscription_id":"whsub_x","url":"http://`},
		{"headers a list", `{"subscription_id":"whsub_x","url":"http://127.0.0.1/","status":"ACTIVE","headers":["X-A: 1"]}`},
		{"retry policy a string", `{"subscription_id":"whsub_x","url":"http://127.0.0.1/","status":"ACTIVE","retry_policy":"fast"}`},
		{"subscription JSON null", `null`},
	} {
		kept[c.name] = badSub(c.raw)
	}
	e.keptForRecovery(t, kept)

	// Delivery records that cannot be read cannot carry a FAILED status:
	// they are quarantined where an operator sees them.
	evID, err := e.admin.SaveEvent(ctx, e.event())
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"del_badattempts00001": strings.Replace(deliveryJSON("del_badattempts00001", sub, evID), `"attempts":0`, `"attempts":"three"`, 1),
		"del_badstatus0000002": strings.Replace(deliveryJSON("del_badstatus0000002", sub, evID), `"status":"PENDING"`, `"status":"pending-ish"`, 1),
		"del_truncated0000001": deliveryJSON("del_truncated0000001", sub, evID)[:40],
		"del_notobject0000001": `"del_notobject0000001"`,
	}
	ids := make([]string, 0, len(bad))
	for id, raw := range bad {
		e.enqueueRaw(t, id, raw)
		ids = append(ids, id)
	}
	got := e.awaitQuarantined(t, ids...)
	for _, id := range ids {
		if got[id]["reason"] != "corrupt_record" {
			t.Errorf("%s: quarantine reason %v, want corrupt_record", id, got[id]["reason"])
		}
	}
	if n := ep.Stats().Requests; n != 0 {
		t.Errorf("%d sends for unreadable records, want none", n)
	}
}

func TestHostileRecords_UnknownSubscriptionStatusHoldsDeliveriesLikeAPausedOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/odd", receiver.Healthy(), nil)
	e.rewriteSubscription(t, sub, map[string]any{"status": "EXPLODED"})
	id := e.deliver(t, sub, e.event(), nil)
	// Not ACTIVE, so not sent; an operator may still fix the status, so the
	// delivery waits (parked) instead of failing.
	waitFor(t, 10*time.Second, "the delivery to be parked", func() bool { return e.parked(id) })
	if n := ep.Stats().Requests; n != 0 {
		t.Errorf("%d sends to a subscription with an unknown status, want none", n)
	}
	if rec := e.rawDelivery(t, id); strings.Contains(rec, `"status":"FAILED"`) || strings.Contains(rec, `"status":"SUCCESS"`) {
		t.Errorf("record = %s, want it still waiting", rec)
	}
}

func TestHostileRecords_ControlCharactersInIdsNeverReachAHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/ids", receiver.Healthy(), nil)
	ctx := context.Background()

	// Ids on the work list: the bridge quarantines them before any lookup.
	evil := []string{"del_evil\r\nX-Injected: 1", "del_nul\x00tail", "del_tab\tx"}
	e.redis.Client.LPush(ctx, store.PendingList, evil[0], evil[1], evil[2])

	// An event stored under an id holding CR/LF, whose event_id (sent as
	// X-Cycles-Event-Id) holds it too.
	crlfEvent := "evt_crlf\r\nX-Injected: 1"
	e.redis.Client.Set(ctx, store.EventKey(crlfEvent), hostileEvent(t, crlfEvent, nil), time.Hour)
	// A well-named event whose request_id (sent as X-Request-Id) and
	// event_type (X-Cycles-Event-Type) carry CR/LF or NUL.
	reqEvent, typeEvent := "evt_crlfrequest00001", "evt_nultype000000001"
	e.redis.Client.Set(ctx, store.EventKey(reqEvent), hostileEvent(t, reqEvent, map[string]any{"request_id": "req\r\nX-Injected: 1"}), time.Hour)
	e.redis.Client.Set(ctx, store.EventKey(typeEvent), hostileEvent(t, typeEvent, map[string]any{"event_type": "budget.exhausted\x00"}), time.Hour)

	e.enqueueRaw(t, "del_crlfevent0000001", deliveryJSON("del_crlfevent0000001", sub, crlfEvent))
	cases := []struct{ name, id, want string }{
		{"event_id with CR/LF", "del_crlfevent0000001", "X-Cycles-Event-Id contains control characters"},
		{"request_id with CR/LF", e.deliver(t, sub, admin.Event{EventID: reqEvent}, nil), "X-Request-Id contains control characters"},
		{"event_type with NUL", e.deliver(t, sub, admin.Event{EventID: typeEvent}, nil), "X-Cycles-Event-Type contains control characters"},
	}
	// A subscription id with CR/LF names no subscription (Redis keys are
	// binary-safe: it cannot reach another key).
	crlfSub := "whsub_crlf\r\nX-Injected: 1"
	evID, err := e.admin.SaveEvent(ctx, e.event())
	if err != nil {
		t.Fatal(err)
	}
	e.enqueueRaw(t, "del_crlfsub000000001", deliveryJSON("del_crlfsub000000001", crlfSub, evID))
	cases = append(cases, struct{ name, id, want string }{"subscription_id with CR/LF", "del_crlfsub000000001", "Subscription not found"})

	for _, c := range cases {
		e.failedWith(t, c.name, c.id, c.want, true)
	}
	e.idle(t)
	got := map[string]any{}
	for _, q := range e.quarantined(t) {
		got[fmt.Sprint(q["payload"])] = q["reason"]
	}
	for _, id := range evil {
		if got[id] != "malformed_id" {
			t.Errorf("work item %q: quarantine reason %v, want malformed_id", id, got[id])
		}
		if n, _ := e.redis.Client.Exists(ctx, store.DeliveryKey(id)).Result(); n != 0 {
			t.Errorf("work item %q created a delivery record", id)
		}
	}
	if n := ep.Stats().Requests; n != 0 {
		t.Errorf("%d requests reached the receiver, want none", n)
	}
}

func TestHostileRecords_OversizedOrInjectingCustomHeaderSetsFailClearly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	many := map[string]string{}
	for i := range 500 {
		many[fmt.Sprintf("X-Tag-%03d", i)] = "v"
	}
	cases := []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"500 headers", many, "500 custom headers, at most 64 may be set"},
		{"100 KB of values", map[string]string{"X-Blob": strings.Repeat("secret-value", 100<<10/12)}, "at most 16384 may be set"},
		{"CR/LF in a value", map[string]string{"X-Token": "secret-value\r\nX-Injected: 1"}, "X-Token contains control characters"},
		{"NUL in a value", map[string]string{"X-Token": "secret-value\x00"}, "X-Token contains control characters"},
		{"CR/LF in a name", map[string]string{"X-A\r\nX-Injected": "1"}, "is not a valid HTTP header name"},
	}
	var eps []*receiver.Endpoint
	ids := make([]string, len(cases))
	for i, c := range cases {
		sub, _, ep := e.subscribe(t, fmt.Sprintf("/hdr-%d", i), receiver.Healthy(), nil)
		e.rewriteSubscription(t, sub, map[string]any{"headers": c.headers})
		eps = append(eps, ep)
		ids[i] = e.deliver(t, sub, e.event(), nil)
	}
	for i, c := range cases {
		e.failedWith(t, c.name, ids[i], c.want, true)
		if rec := e.rawDelivery(t, ids[i]); strings.Contains(rec, "secret-value") {
			t.Errorf("%s: the record quotes a header value: %.300s", c.name, rec)
		}
	}
	for i, ep := range eps {
		if n := ep.Stats().Requests; n != 0 {
			t.Errorf("%s: %d requests sent, want none", cases[i].name, n)
		}
	}
}
