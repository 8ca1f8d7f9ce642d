package engine_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

func TestDelivery_SendsStoredEventBytesWithContractHeadersAndRecordsSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, secret, ep := e.subscribe(t, "/hook", receiver.Healthy(), func(s *admin.Subscription) {
		s.Headers = map[string]string{"Authorization": "Bearer tok_abc"}
	})
	ctx := context.Background()
	// Stored exactly as some producer wrote it: unknown fields, decimals the
	// reference would re-serialize (1.50 → 1.5), an open actor type and category.
	traceID := proto.NewTraceID()
	raw := `{"event_id":"evt_0123456789abcdef","event_type":"budget.exhausted","category":"budget","timestamp":"2026-04-01T12:00:00.118Z","tenant_id":"acme-corp","actor":{"type":"admin_on_behalf_of","key_id":"k","future":true},"source":"cycles-server","data":{"rate":1.50,"big":1e2,"n":null},"request_id":"req-42","trace_id":"` + traceID + `","x_unknown":{"kept":[1,2]}}`
	if err := e.store.SaveEvent(ctx, []byte(raw), "evt_0123456789abcdef", "acme-corp", "", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	id := e.deliver(t, sub, admin.Event{EventID: "evt_0123456789abcdef", TraceID: traceID}, nil)
	// An unknown field admin might add later must survive our write-back.
	if err := e.redis.Client.Eval(ctx, `local v = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], string.sub(v, 1, -2) .. ',"x_future":1.50}', 'KEEPTTL') return 1`, []string{store.DeliveryKey(id)}).Err(); err != nil {
		t.Fatal(err)
	}

	rec := e.final(t, id)
	if rec.Status != proto.DeliverySuccess || rec.Attempts != 1 || rec.ResponseStatus == nil || *rec.ResponseStatus != 200 || rec.ResponseTimeMs == nil || rec.CompletedAt == nil {
		t.Fatalf("record after success = %s", rec.Raw)
	}
	if !strings.Contains(string(rec.Raw), `"x_future":1.50`) {
		t.Errorf("unknown field lost on write-back: %s", rec.Raw)
	}
	got := ep.Deliveries()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	r := got[0]
	if string(r.Body) != raw {
		t.Errorf("body is not the stored bytes:\n got %s\nwant %s", r.Body, raw)
	}
	if !r.SignatureOK || r.Header.Get("X-Cycles-Signature") != proto.Sign(secret, []byte(raw)) {
		t.Errorf("signature %q does not verify", r.Header.Get("X-Cycles-Signature"))
	}
	want := map[string]string{
		"Content-Type":        "application/json",
		"X-Cycles-Event-Id":   "evt_0123456789abcdef",
		"X-Cycles-Event-Type": "budget.exhausted",
		"X-Cycles-Trace-Id":   traceID,
		"X-Request-Id":        "req-42",
		"Authorization":       "Bearer tok_abc",
	}
	for k, v := range want {
		if got := r.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if ua := r.Header.Get("User-Agent"); !strings.HasPrefix(ua, "cycles-server-events/") || !strings.Contains(ua, "jetrelay") {
		t.Errorf("User-Agent = %q", ua)
	}
	m := traceparentRE.FindStringSubmatch(r.Header.Get("traceparent"))
	if m == nil || m[1] != traceID || m[3] != "01" {
		t.Errorf("traceparent = %q, want 00-%s-<span>-01", r.Header.Get("traceparent"), traceID)
	}
	waitFor(t, 5*time.Second, "subscription success bookkeeping", func() bool {
		s := e.subscription(t, sub)
		return s.LastSuccessAt != nil && s.LastTriggeredAt != nil && s.ConsecutiveFailures == 0
	})
}

func TestDelivery_AdminEmitIsDeliveredEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{adminKey: testKey, engineKey: testKey})
	_, _, ep := e.subscribe(t, "/a", receiver.Healthy(), nil)
	_, _, other := e.subscribe(t, "/other", receiver.Healthy(), func(s *admin.Subscription) { s.EventTypes = []string{"tenant.created"} })
	_, ids, err := e.admin.Emit(context.Background(), e.event(), admin.TraceSnapshot{TraceFlags: "01", InboundValid: ptr(false)})
	if err != nil || len(ids) != 1 {
		t.Fatalf("Emit: ids=%v err=%v", ids, err)
	}
	if rec := e.final(t, ids[0]); rec.Status != proto.DeliverySuccess {
		t.Fatalf("status %s: %s", rec.Status, rec.Raw)
	}
	if s := ep.Stats(); s.Unique != 1 || s.BadSig != 0 {
		t.Errorf("matching endpoint stats = %+v", s)
	}
	if n := other.Stats().Requests; n != 0 {
		t.Errorf("non-matching subscription got %d requests", n)
	}
}

func TestDelivery_WithoutSecretIsRefusedInsteadOfSentUnsigned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	missing, _, ep := e.subscribe(t, "/missing", receiver.Healthy(), nil)
	e.redis.Client.Del(ctx, store.SecretKey(missing))
	blank, _, blankEP := e.subscribe(t, "/blank", receiver.Healthy(), nil)
	// An admin PATCH stores any non-null secret, even a blank one.
	e.redis.Client.Set(ctx, store.SecretKey(blank), " \t", 0)
	for _, sub := range []string{missing, blank} {
		rec := e.final(t, e.deliver(t, sub, e.event(), nil))
		if rec.Status != proto.DeliveryFailed || rec.ErrorMessage == nil || *rec.ErrorMessage != "Webhook signing secret is missing; refusing unsigned delivery" ||
			rec.Attempts != 0 || rec.ResponseStatus != nil {
			t.Errorf("record = %s; want FAILED without an attempt, refusing the unsigned send", rec.Raw)
		}
		if s := e.subscription(t, sub); s.ConsecutiveFailures != 0 {
			t.Errorf("a refused send counted toward auto-disable: consecutive_failures=%d", s.ConsecutiveFailures)
		}
	}
	if n := ep.Stats().Requests + blankEP.Stats().Requests; n != 0 {
		t.Errorf("receivers got %d requests; nothing may be sent unsigned", n)
	}
}

func TestDelivery_WithoutSecretIsSentUnsignedWhenAllowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{engine: func(c *engine.Config) { c.AllowUnsigned = true }})
	sub, _, _ := e.subscribe(t, "/signed", receiver.Healthy(), nil)
	e.redis.Client.Del(context.Background(), store.SecretKey(sub))
	ep := e.recv.Handle("/signed", "", receiver.Healthy())
	id := e.deliver(t, sub, e.event(), nil)
	if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
		t.Fatalf("status %s", rec.Status)
	}
	if d := ep.Deliveries(); len(d) != 1 || d[0].Signed {
		t.Fatalf("want one unsigned request, got %d (signed=%v)", len(d), len(d) == 1 && d[0].Signed)
	}
}

func TestDelivery_NewSubscriptionWaitsForItsSecretInsteadOfSendingUnsigned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, secret, ep := e.subscribe(t, "/new", receiver.Healthy(), func(s *admin.Subscription) { s.CreatedAt = time.Now() })
	ctx := context.Background()
	// Admin's create writes webhook:{id}, then webhook:secret:{id} separately;
	// a delivery can be dequeued in between.
	e.redis.Client.Del(ctx, store.SecretKey(sub))
	id := e.deliver(t, sub, e.event(), nil)
	waitFor(t, 10*time.Second, "the engine to look at the delivery", func() bool {
		c, err := e.js.Consumer(ctx, e.qc.Stream, e.qc.Consumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.Delivered.Consumer > 0
	})
	e.redis.Client.Set(ctx, store.SecretKey(sub), secret, 0)
	if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
		t.Fatalf("status %s", rec.Status)
	}
	if s := ep.Stats(); s.Accepted != 1 || s.BadSig != 0 {
		t.Fatalf("receiver stats %+v; want one signed delivery", s)
	}
}

func TestDelivery_EncryptedSecretIsDecryptedToSign(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{adminKey: testKey, engineKey: testKey})
	sub, _, ep := e.subscribe(t, "/enc", receiver.Healthy(), nil)
	stored, _ := e.redis.Client.Get(context.Background(), store.SecretKey(sub)).Result()
	if !strings.HasPrefix(stored, "enc:") {
		t.Fatalf("secret not stored encrypted: %q", stored)
	}
	id := e.deliver(t, sub, e.event(), nil)
	if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
		t.Fatalf("status %s", rec.Status)
	}
	if s := ep.Stats(); s.Accepted != 1 || s.BadSig != 0 {
		t.Fatalf("receiver stats %+v: signature with the decrypted secret expected", s)
	}
}

func TestDelivery_UndecryptableSecretIsNeverSentUnsigned(t *testing.T) {
	t.Parallel()
	otherKey := "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
	for name, engineKey := range map[string]string{"no key configured": "", "wrong key": otherKey} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{adminKey: testKey, engineKey: engineKey})
			sub, _, ep := e.subscribe(t, "/closed", receiver.Healthy(), nil)
			id := e.deliver(t, sub, e.event(), nil)
			var rec *store.DeliveryRecord
			waitFor(t, 10*time.Second, "the delivery to note the unavailable secret", func() bool {
				r, err := e.store.Delivery(context.Background(), id)
				rec = r
				return err == nil && r.ErrorMessage != nil && strings.Contains(*r.ErrorMessage, "Signing secret unavailable")
			})
			if rec.Status.Terminal() || rec.Attempts != 0 {
				t.Errorf("delivery must wait, not fail or count an attempt: %s", rec.Raw)
			}
			if strings.Contains(*rec.ErrorMessage, "whsec_") || strings.Contains(*rec.ErrorMessage, "enc:") {
				t.Errorf("error message leaks the secret: %q", *rec.ErrorMessage)
			}
			if n := ep.Stats().Requests; n != 0 {
				t.Fatalf("receiver got %d requests; an undecryptable secret must never be sent unsigned", n)
			}
		})
	}
}

func TestDelivery_FailedWithoutSendWhenItCannotBeDelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	active, _, ep := e.subscribe(t, "/active", receiver.Healthy(), nil)

	adminOnly := e.event()
	adminOnly.EventType, adminOnly.Category = "api_key.revoked", "api_key"

	cases := []struct {
		name    string
		id      string
		message string
	}{
		{"admin-only event to a tenant subscription", e.deliver(t, active, adminOnly, nil),
			"Ownership boundary (#209): api_key.revoked/api_key events are admin-only and not delivered to a tenant-owned subscription"},
		{"stale", e.deliver(t, active, e.event(), func(d *admin.Delivery) { d.AttemptedAt = time.Now().Add(-25 * time.Hour) }), "Delivery expired: 25h old (max 24h)"},
		{"event missing", e.deliver(t, active, admin.Event{EventID: "evt_missing000000001"}, nil), "Event not found: evt_missing000000001"},
		{"subscription missing", e.deliver(t, "whsub_nonexistent00001", e.event(), nil), "Subscription not found"},
	}
	for _, c := range cases {
		rec := e.final(t, c.id)
		if rec.Status != proto.DeliveryFailed || rec.ErrorMessage == nil || *rec.ErrorMessage != c.message || rec.CompletedAt == nil || rec.Attempts != 0 {
			t.Errorf("%s: record = %s, want FAILED %q with no attempt", c.name, rec.Raw, c.message)
		}
	}
	if n := ep.Stats().Requests; n != 0 {
		t.Errorf("%d sends for deliveries that must fail without one", n)
	}
	if s := e.subscription(t, active); s.ConsecutiveFailures != 0 {
		t.Errorf("failures without a send must not count toward auto-disable, consecutive_failures=%d", s.ConsecutiveFailures)
	}
}

func TestDelivery_AlreadyFinalOrMissingRecordsAreNotSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/x", receiver.Healthy(), nil)
	done := e.deliver(t, sub, e.event(), func(d *admin.Delivery) { d.Status = proto.DeliverySuccess; d.Attempts = 1 })
	before := e.rawDelivery(t, done)
	ctx := context.Background()
	e.redis.Client.LPush(ctx, store.PendingList, "del_doesnotexist0001")
	e.idle(t)
	if n := ep.Stats().Requests; n != 0 {
		t.Errorf("receiver got %d requests", n)
	}
	if after := e.rawDelivery(t, done); after != before {
		t.Errorf("final record rewritten:\n%s\n%s", before, after)
	}
	if n, _ := e.redis.Client.Exists(ctx, store.DeliveryKey("del_doesnotexist0001")).Result(); n != 0 {
		t.Errorf("a missing delivery record was created")
	}
}

func TestDelivery_CorruptRecordIsQuarantined(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.redis.Client.Set(ctx, store.DeliveryKey("del_corrupt000000001"), `{"delivery_id":"del_corrupt000000001","status":`, time.Hour)
	e.redis.Client.Set(ctx, store.DeliveryKey("del_badstatus0000001"), `{"delivery_id":"del_badstatus0000001","status":"EXPLODED"}`, time.Hour)
	e.redis.Client.LPush(ctx, store.PendingList, "del_corrupt000000001", "del_badstatus0000001")
	e.idle(t)
	entries, err := e.redis.Client.LRange(ctx, store.FailedList, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(entries, "\n")
	for _, id := range []string{"del_corrupt000000001", "del_badstatus0000001"} {
		if !strings.Contains(joined, `"delivery_id":"`+id+`"`) || !strings.Contains(joined, "corrupt_record") || !strings.Contains(joined, `\"delivery_id\":\"`+id) {
			t.Errorf("%s not quarantined in dispatch:failed: %s", id, joined)
		}
	}
}

func TestDelivery_TraceFlagsArePreservedOnlyWhenInboundValid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/trace", receiver.Healthy(), nil)
	cases := []struct {
		name      string
		flags     string
		valid     *bool
		wantFlags string
	}{
		{"valid inbound keeps its flags", "00", ptr(true), "00"},
		{"invalid inbound defaults to sampled", "00", ptr(false), "01"},
		{"off-request emit defaults to sampled", "", nil, "01"},
	}
	byEvent := map[string]string{}
	for _, c := range cases {
		ev := e.event()
		id := e.deliver(t, sub, ev, func(d *admin.Delivery) { d.TraceFlags = c.flags; d.TraceparentInboundValid = c.valid })
		e.final(t, id)
		byEvent[ev.TraceID] = c.wantFlags
	}
	for _, d := range ep.Deliveries() {
		m := traceparentRE.FindStringSubmatch(d.Header.Get("traceparent"))
		if m == nil {
			t.Fatalf("bad traceparent %q", d.Header.Get("traceparent"))
		}
		if want := byEvent[m[1]]; m[3] != want {
			t.Errorf("trace %s: flags %s, want %s", m[1], m[3], want)
		}
	}

	// A delivery without trace_id takes the event's, and keeps it.
	ev := e.event()
	id := e.deliver(t, sub, ev, func(d *admin.Delivery) { d.TraceID = "" })
	if rec := e.final(t, id); rec.TraceID != ev.TraceID {
		t.Errorf("trace_id = %q, want the event's %q", rec.TraceID, ev.TraceID)
	}
}

func TestDelivery_ReservedCustomHeadersAreDroppedAndTheDeliveryStillGoesOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	// Admin stores header names unchecked: records like this one exist.
	sub, _, ep := e.subscribe(t, "/hdr", receiver.Healthy(), func(s *admin.Subscription) {
		s.Headers = map[string]string{"Content-Type": "text/plain", "X-Cycles-Tenant": "acme",
			"X-Cycles-Signature": "sha256=forged", "traceparent": "00-bogus", "X-Team": "payments"}
		s.DisableAfterFailures = 1
	})
	for range 2 {
		if rec := e.final(t, e.deliver(t, sub, e.event(), nil)); rec.Status != proto.DeliverySuccess || rec.Attempts != 1 {
			t.Fatalf("record = %s; want SUCCESS after one send", rec.Raw)
		}
	}
	if s := ep.Stats(); s.Accepted != 2 || s.BadSig != 0 {
		t.Fatalf("receiver stats %+v; want two deliveries signed by the relay", s)
	}
	for _, d := range ep.Deliveries() {
		if got := d.Header.Values("Content-Type"); len(got) != 1 || got[0] != "application/json" {
			t.Errorf("Content-Type = %q, want only the relay's application/json", got)
		}
		if got := d.Header.Values("X-Cycles-Signature"); len(got) != 1 || strings.Contains(got[0], "forged") {
			t.Errorf("X-Cycles-Signature = %q, want only the relay's signature", got)
		}
		if got := d.Header.Get("X-Cycles-Tenant"); got != "" {
			t.Errorf("reserved X-Cycles-Tenant sent: %q", got)
		}
		if got := d.Header.Values("Traceparent"); len(got) != 1 || strings.Contains(got[0], "bogus") {
			t.Errorf("traceparent = %q, want only the relay's", got)
		}
		if got := d.Header.Get("X-Team"); got != "payments" {
			t.Errorf("X-Team = %q, want the subscription's other custom header kept", got)
		}
	}
	if s := e.subscription(t, sub); s.Status != proto.SubscriptionActive || s.ConsecutiveFailures != 0 {
		t.Errorf("subscription status %s, consecutive_failures %d; want ACTIVE with none", s.Status, s.ConsecutiveFailures)
	}
}

func TestDelivery_UnsupportedSchemeFailsWithClearError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, _ := e.subscribe(t, "/unused", receiver.Healthy(), nil)
	// Admin only accepts http(s); another writer (or a later jetrelay command) may not.
	if _, err := e.store.UpdateSubscription(context.Background(), sub, func(*proto.Subscription) (store.Patch, error) {
		return store.Patch{{Name: "url", Value: "ftp://files.example.com/drop"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	rec := e.final(t, e.deliver(t, sub, e.event(), nil))
	if rec.Status != proto.DeliveryFailed || rec.ErrorMessage == nil || !strings.Contains(*rec.ErrorMessage, "unsupported URL scheme") {
		t.Fatalf("record = %s", rec.Raw)
	}
}

func TestDelivery_ManyDeliveriesAcrossSubscriptionsAllSucceedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	var eps []*receiver.Endpoint
	var ids []string
	for i := range 5 {
		sub, _, ep := e.subscribe(t, fmt.Sprintf("/load/%d", i), receiver.Healthy(), nil)
		eps = append(eps, ep)
		for range 100 {
			ids = append(ids, e.deliver(t, sub, e.event(), nil))
		}
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("%s: %s", id, rec.Raw)
		}
	}
	for i, ep := range eps {
		if s := ep.Stats(); s.Unique != 100 || s.Duplicates != 0 || s.BadSig != 0 {
			t.Errorf("endpoint %d: %+v", i, s)
		}
	}
}

func TestDelivery_UnknownCategoryAndActorTypeAreDeliveredVerbatimToSystemSubscriptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/system", receiver.Healthy(), func(s *admin.Subscription) { s.TenantID = proto.SystemTenant })
	raw := `{"event_id":"evt_future0000000001","event_type":"quota.rebalanced","category":"quota","timestamp":"2026-04-01T12:00:00Z","tenant_id":"acme-corp","actor":{"type":"admin_on_behalf_of"},"source":"cycles-admin","data":{}}`
	if err := e.store.SaveEvent(context.Background(), []byte(raw), "evt_future0000000001", "acme-corp", "", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	rec := e.final(t, e.deliver(t, sub, admin.Event{EventID: "evt_future0000000001"}, nil))
	if rec.Status != proto.DeliverySuccess {
		t.Fatalf("record = %s", rec.Raw)
	}
	if d := ep.Deliveries(); len(d) != 1 || string(d[0].Body) != raw || d[0].EventType != "quota.rebalanced" {
		t.Fatalf("receiver got %d requests; want the stored bytes once", len(d))
	}
}

func TestInactive_PausedSubscriptionHoldsItsDeliveriesUntilReEnabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub, _, ep := e.subscribe(t, "/paused", receiver.Healthy(), func(s *admin.Subscription) { s.Status = proto.SubscriptionPaused })
	ids := []string{e.deliver(t, sub, e.event(), nil), e.deliver(t, sub, e.event(), nil)}
	waitFor(t, 10*time.Second, "the deliveries to be parked", func() bool { return e.parked(ids[0]) && e.parked(ids[1]) })
	for _, id := range ids {
		if r, err := e.store.Delivery(context.Background(), id); err != nil || r.Status != proto.DeliveryPending || r.Attempts != 0 {
			t.Fatalf("a paused subscription's delivery must wait untouched: %v %v", r, err)
		}
	}
	if n := ep.Stats().Requests; n != 0 {
		t.Fatalf("paused subscription received %d requests", n)
	}
	// The operator resumes it (admin's PATCH): no restart, the deliveries go out.
	if err := e.admin.SetStatus(context.Background(), sub, proto.SubscriptionActive); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if rec := e.final(t, id); rec.Status != proto.DeliverySuccess {
			t.Fatalf("after re-enable: %s", rec.Raw)
		}
	}
}

func TestInactive_FailPolicyFailsLikeTheReference(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{engine: func(c *engine.Config) { c.InactivePolicy = engine.InactiveFail }})
	paused, _, ep := e.subscribe(t, "/paused", receiver.Healthy(), func(s *admin.Subscription) { s.Status = proto.SubscriptionPaused })
	disabled, _, _ := e.subscribe(t, "/disabled", receiver.Healthy(), func(s *admin.Subscription) { s.Status = proto.SubscriptionDisabled })
	for sub, want := range map[string]string{paused: "Subscription not active: PAUSED", disabled: "Subscription not active: DISABLED"} {
		rec := e.final(t, e.deliver(t, sub, e.event(), nil))
		if rec.Status != proto.DeliveryFailed || rec.ErrorMessage == nil || *rec.ErrorMessage != want {
			t.Errorf("record = %s, want FAILED %q", rec.Raw, want)
		}
	}
	if n := ep.Stats().Requests; n != 0 {
		t.Errorf("%d sends to an inactive subscription", n)
	}
}

func TestDelivery_UnreadableEventOrSubscriptionIsKeptForRecoveryAndDeliveredOnceRepaired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	sub, _, ep := e.subscribe(t, "/repaired", receiver.Healthy(), nil)
	goodSub, _ := e.redis.Client.Get(ctx, store.SubscriptionKey(sub)).Result()
	ev := e.event()
	ev.EventID, _ = e.admin.SaveEvent(ctx, ev)
	goodEvent, _ := e.redis.Client.Get(ctx, store.EventKey(ev.EventID)).Result()

	e.redis.Client.Set(ctx, store.EventKey(ev.EventID), `{"event_id":"`+ev.EventID+`","event_type":`, time.Hour)
	e.redis.Client.Set(ctx, store.SubscriptionKey(sub), `{"subscription_id":17}`, 0)
	badEvent := e.deliver(t, sub, admin.Event{EventID: ev.EventID}, nil)
	waitFor(t, 10*time.Second, "the engine to try the delivery again", func() bool {
		c, err := e.js.Consumer(ctx, e.qc.Stream, e.qc.Consumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.Delivered.Consumer >= 3
	})
	rec, err := e.store.Delivery(ctx, badEvent)
	if err != nil || rec.Status.Terminal() || rec.Attempts != 0 || ep.Stats().Requests != 0 {
		t.Fatalf("record = %v (%v); want it kept PENDING, unsent, while its records are unreadable", rec, err)
	}
	// The operator repairs both records: the delivery goes out.
	e.redis.Client.Set(ctx, store.EventKey(ev.EventID), goodEvent, time.Hour)
	e.redis.Client.Set(ctx, store.SubscriptionKey(sub), goodSub, 0)
	if rec := e.final(t, badEvent); rec.Status != proto.DeliverySuccess {
		t.Fatalf("record = %s; want SUCCESS once repaired", rec.Raw)
	}
}

func TestDelivery_BudgetEventWithoutCategoryReachesATenantSubscription(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	sub, _, ep := e.subscribe(t, "/uncategorized", receiver.Healthy(), nil)
	// As the runtime may write it: a known budget type, category null.
	id := "evt_nocategory00001"
	e.redis.Client.Set(ctx, store.EventKey(id), `{"event_id":"`+id+`","event_type":"budget.exhausted","category":null,"timestamp":"2026-04-01T12:00:00Z","tenant_id":"acme-corp","source":"cycles-server","data":{"ledger_id":"led_1"}}`, time.Hour)
	if rec := e.final(t, e.deliver(t, sub, admin.Event{EventID: id}, nil)); rec.Status != proto.DeliverySuccess {
		t.Fatalf("record = %s; want SUCCESS: the type classifies the event as tenant-accessible (upstream 0.1.25.24)", rec.Raw)
	}
	if n := ep.Stats().Accepted; n != 1 {
		t.Errorf("receiver accepted %d deliveries, want 1", n)
	}
}

// A work item's headers name its delivery's subscription and event so the
// engine reads everything in one round trip; they are a hint. A work item
// whose headers name another subscription (a forged or stale item) still
// goes where the delivery record says, with that subscription's secret.
func TestDelivery_AWorkItemNamingAnotherSubscriptionGoesWhereTheRecordSays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{adminKey: testKey, engineKey: testKey})
	sub, _, ep := e.subscribe(t, "/right", receiver.Healthy(), nil)
	wrong, _, wrongEP := e.subscribe(t, "/wrong", receiver.Healthy(), nil)
	ctx := context.Background()
	evt, err := e.admin.SaveEvent(ctx, e.event())
	if err != nil {
		t.Fatal(err)
	}
	// The record as admin writes it, but not enqueued: the only work item
	// is the one published below.
	id := "del_hinttest000001"
	rec := `{"delivery_id":"` + id + `","subscription_id":"` + sub + `","event_id":"` + evt + `","event_type":"budget.exhausted","status":"PENDING",` +
		`"attempted_at":"` + proto.FormatInstant(time.Now()) + `","attempts":0}`
	if err := e.redis.Client.Set(ctx, store.DeliveryKey(id), rec, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	msg := queue.NewMsg(e.qc.Subject, id)
	queue.SetRoute(msg, queue.Route{SubscriptionID: wrong, EventID: evt})
	if _, err := e.js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if got := e.final(t, id); got.Status != proto.DeliverySuccess {
		t.Fatalf("status %s: %s", got.Status, got.Raw)
	}
	if s := ep.Stats(); s.Unique != 1 || s.BadSig != 0 {
		t.Errorf("the record's subscription got %+v, want the delivery, signed with its secret", s)
	}
	if n := wrongEP.Stats().Requests; n != 0 {
		t.Errorf("the subscription the headers named got %d requests", n)
	}
}
