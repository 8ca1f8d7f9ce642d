package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// ErrSubscriptionNotFound is returned when webhook:{id} does not exist.
var ErrSubscriptionNotFound = errors.New("admin: subscription not found")

// Writer writes webhook-plane records the way cycles-server-admin does.
// It is safe for concurrent use. Like admin, it never uses transactions
// beyond the Lua scripts admin uses, so the same races exist.
type Writer struct {
	rdb     redis.UniversalClient
	key     *proto.SecretKey
	now     func() time.Time
	schemes []string // URL schemes allowed besides http(s), lower case

	saveEvent, saveWebhook, deleteWebhook, saveAndEnqueueOnce *redis.Script
}

// NewWriter returns a Writer on rdb. Signing secrets are stored encrypted
// ("enc:…") with key; a nil key stores them in plaintext, as admin does with
// WEBHOOK_SECRET_ALLOW_PLAINTEXT=true.
func NewWriter(rdb redis.UniversalClient, key *proto.SecretKey) *Writer {
	return &Writer{
		rdb: rdb,
		key: key,
		// Java's Instant.now() on Linux has microsecond resolution, so
		// admin's timestamps carry 6 fractional digits, never 9.
		now:                func() time.Time { return time.Now().UTC().Truncate(time.Microsecond) },
		saveEvent:          redis.NewScript(store.SaveEventLua),
		saveWebhook:        redis.NewScript(SaveWebhookLua),
		deleteWebhook:      redis.NewScript(DeleteWebhookLua),
		saveAndEnqueueOnce: redis.NewScript(SaveAndEnqueueOnceLua),
	}
}

// AllowSchemes returns a Writer like w whose CreateSubscription also
// accepts URLs with these schemes (nats, sqs: transport plugins'), which
// admin's API refuses. `jetrelay subscriptions create` uses it; the records
// are otherwise exactly admin's.
func (w *Writer) AllowSchemes(schemes ...string) *Writer {
	c := *w
	c.schemes = slices.Clone(w.schemes)
	for _, s := range schemes {
		c.schemes = append(c.schemes, strings.ToLower(s))
	}
	return &c
}

// CreateSubscription stores s as admin's create does (contract §5.5):
// SaveWebhookLua indexes webhook:{id} under webhooks:{owner} and
// webhooks:_all, then a separate SET stores the signing secret under
// webhook:secret:{id}. It returns the id and the plaintext secret, minting
// either when s leaves it empty. It does not emit webhook.created
// (see WebhookCreatedEvent).
func (w *Writer) CreateSubscription(ctx context.Context, s Subscription) (id, secret string, err error) {
	if err := s.validate(w.schemes); err != nil {
		return "", "", err
	}
	if s.ID == "" {
		s.ID = NewSubscriptionID()
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = w.now()
	}
	if isBlank(s.SigningSecret) {
		s.SigningSecret = NewSigningSecret()
	}
	if s.Metadata, err = compactJSON(s.Metadata); err != nil {
		return "", "", err
	}
	keys := []string{keyWebhook(s.ID), keyWebhooks(s.owner()), keyWebhooksAll}
	if err := w.saveWebhook.Run(ctx, w.rdb, keys, s.JSON(), s.ID).Err(); err != nil {
		return "", "", fmt.Errorf("admin: save subscription %s: %w", s.ID, err)
	}
	stored := s.SigningSecret
	if w.key != nil {
		if stored, err = w.key.Encrypt(s.SigningSecret); err != nil {
			return "", "", fmt.Errorf("admin: encrypt signing secret of %s: %w", s.ID, err)
		}
	}
	if err := w.rdb.Set(ctx, keyWebhookSecret(s.ID), stored, 0).Err(); err != nil {
		return "", "", fmt.Errorf("admin: store signing secret of %s: %w", s.ID, err)
	}
	return s.ID, s.SigningSecret, nil
}

// SetStatus changes a subscription's status as admin's PATCH does: a
// read-modify-write of the whole record (no CAS, so it races the events
// service's merge exactly as admin does), updated_at = now, and any change
// to ACTIVE resets consecutive_failures to 0. Admin's PATCH refuses
// DISABLED; it is accepted here to stand in for auto-disable and the
// tenant-close cascade. No lifecycle event is emitted.
func (w *Writer) SetStatus(ctx context.Context, id string, st proto.SubscriptionStatus) error {
	if !st.Known() {
		return fmt.Errorf("admin: status %s is not ACTIVE, PAUSED or DISABLED", strconv.Quote(string(st)))
	}
	raw, err := w.rdb.Get(ctx, keyWebhook(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("%w: %s", ErrSubscriptionNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("admin: read subscription %s: %w", id, err)
	}
	set := map[string]json.RawMessage{
		"status":     proto.AppendJSONString(nil, string(st)),
		"updated_at": proto.AppendJSONString(nil, proto.FormatInstant(w.now())),
	}
	if st == proto.SubscriptionActive {
		set["consecutive_failures"] = json.RawMessage("0")
	}
	updated, err := rewriteSubscription(raw, set)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, id)
	}
	if err := w.rdb.Set(ctx, keyWebhook(id), updated, 0).Err(); err != nil {
		return fmt.Errorf("admin: write subscription %s: %w", id, err)
	}
	return nil
}

// DeleteSubscription removes a subscription as admin's DELETE does:
// DeleteWebhookLua (record and index entries), then DEL of its secret.
// Deliveries already queued for it later fail "Subscription not found".
func (w *Writer) DeleteSubscription(ctx context.Context, id string) error {
	raw, err := w.rdb.Get(ctx, keyWebhook(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("%w: %s", ErrSubscriptionNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("admin: read subscription %s: %w", id, err)
	}
	sub, err := proto.ParseSubscription(raw)
	if err != nil {
		return fmt.Errorf("admin: subscription %s: %w", id, err)
	}
	keys := []string{keyWebhook(id), keyWebhooks(sub.TenantID), keyWebhooksAll}
	if err := w.deleteWebhook.Run(ctx, w.rdb, keys, id).Err(); err != nil {
		return fmt.Errorf("admin: delete subscription %s: %w", id, err)
	}
	if err := w.rdb.Del(ctx, keyWebhookSecret(id)).Err(); err != nil {
		return fmt.Errorf("admin: delete signing secret of %s: %w", id, err)
	}
	return nil
}

// SaveEvent stores e with store.SaveEventLua: event:{id} with a 90-day TTL,
// indexed in events:{tenant} and events:_all by its timestamp in epoch
// millis, and in events:correlation:{cid} when it has a correlation id.
// An empty id, timestamp, category or source is filled first.
func (w *Writer) SaveEvent(ctx context.Context, e Event) (eventID string, err error) {
	e, err = w.save(ctx, e)
	return e.EventID, err
}

func (w *Writer) save(ctx context.Context, e Event) (Event, error) {
	if err := e.Validate(); err != nil {
		return e, err
	}
	if e.EventID == "" {
		e.EventID = proto.NewEventID()
	}
	if e.Timestamp.IsZero() {
		e.Timestamp = w.now()
	}
	if e.Category == "" {
		e.Category = categoryOf(e.EventType)
	}
	if e.Source == "" {
		e.Source = sourceAdmin
	}
	var err error
	if e.Data, err = compactJSON(e.Data); err != nil {
		return e, err
	}
	if e.Metadata, err = compactJSON(e.Metadata); err != nil {
		return e, err
	}
	keys := []string{keyEvent(e.EventID), keyEvents(e.TenantID), keyEventsAll}
	if !isBlank(e.CorrelationID) {
		keys = append(keys, keyCorrelation(e.CorrelationID))
	}
	score := strconv.FormatInt(e.Timestamp.UnixMilli(), 10)
	if err := w.saveEvent.Run(ctx, w.rdb, keys, e.JSON(), score, e.EventID, eventTTLSeconds).Err(); err != nil {
		return e, fmt.Errorf("admin: save event %s: %w", e.EventID, err)
	}
	return e, nil
}

// TraceSnapshot is the trace context admin copies onto each delivery
// (contract §5.2). The zero value is an emit outside an HTTP request
// (schedulers, reconcilers): the delivery gets the event's trace_id and no
// flags. An emit inside a request without a valid inbound traceparent is
// {TraceID: <request trace id>, TraceFlags: "01", InboundValid: &false};
// with one, TraceFlags is the inbound flags and InboundValid &true.
type TraceSnapshot struct {
	// TraceID is the request's trace id; it also becomes the event's
	// trace_id when the event has none.
	TraceID      string
	TraceFlags   string
	InboundValid *bool
}

// Emit is admin's EventService.emitRequired with live dispatch (contract
// §5.2): it saves e, then for every ACTIVE subscription in
// webhooks:{tenant} ∪ webhooks:__system__ that matches e (event type or
// category, scope filter, ownership boundary) enqueues a PENDING delivery
// with SaveAndEnqueueOnceLua under its deterministic id. It returns the
// event id and the ids of the deliveries actually enqueued, in subscription
// id order; re-emitting an event with the same id enqueues nothing.
// Unreadable subscription records are skipped, as admin skips them.
func (w *Writer) Emit(ctx context.Context, e Event, trace TraceSnapshot) (eventID string, deliveryIDs []string, err error) {
	eventID, queued, err := w.EmitTimed(ctx, e, trace)
	for _, q := range queued {
		deliveryIDs = append(deliveryIDs, q.DeliveryID)
	}
	return eventID, deliveryIDs, err
}

// Queued is a delivery Emit enqueued, and when: the wall-clock moment just
// before its SaveAndEnqueueOnceLua call was sent.
type Queued struct {
	DeliveryID string
	At         time.Time
}

// EmitTimed is Emit that also says when each delivery it enqueued was
// sent: after the event was saved, the subscriptions read and the
// deliveries before it enqueued (admin enqueues them one after another).
// It is where an enqueue → receipt latency starts (the benchmark's), so
// admin's own writes before it are not counted as the dispatcher's.
func (w *Writer) EmitTimed(ctx context.Context, e Event, trace TraceSnapshot) (eventID string, queued []Queued, err error) {
	if e.TraceID == "" {
		e.TraceID = trace.TraceID
	}
	if e, err = w.save(ctx, e); err != nil {
		return "", nil, err
	}
	ids, err := w.candidates(ctx, e.TenantID)
	if err != nil {
		return e.EventID, nil, err
	}
	gets := make([]*redis.StringCmd, len(ids))
	if _, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			gets[i] = p.Get(ctx, keyWebhook(id))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return e.EventID, nil, fmt.Errorf("admin: read subscriptions: %w", err)
	}
	traceID := trace.TraceID
	if traceID == "" {
		traceID = e.TraceID
	}
	for i, get := range gets {
		raw, err := get.Bytes()
		if err != nil {
			continue // vanished between SUNION and GET
		}
		sub, err := proto.ParseSubscription(raw)
		if err != nil || !dispatchable(sub, e) {
			continue
		}
		d := Delivery{
			DeliveryID:              DeliveryID(e.EventID, ids[i]),
			SubscriptionID:          ids[i],
			EventID:                 e.EventID,
			EventType:               e.EventType,
			AttemptedAt:             w.now(),
			TraceID:                 traceID,
			TraceFlags:              trace.TraceFlags,
			TraceparentInboundValid: trace.InboundValid,
		}
		sent := time.Now()
		ok, err := w.enqueueOnce(ctx, d)
		if err != nil {
			return e.EventID, queued, err
		}
		if ok {
			queued = append(queued, Queued{DeliveryID: d.DeliveryID, At: sent})
		}
	}
	return e.EventID, queued, nil
}

// candidates is admin's SMEMBERS webhooks:{tenant} ∪ SMEMBERS
// webhooks:__system__, sorted. Two SMEMBERS rather than one SUNION, as
// admin does, so the sets may live on different cluster slots.
func (w *Writer) candidates(ctx context.Context, tenant string) ([]string, error) {
	own, err := w.rdb.SMembers(ctx, keyWebhooks(tenant)).Result()
	if err != nil {
		return nil, fmt.Errorf("admin: list subscriptions of tenant %s: %w", javaString(tenant), err)
	}
	system, err := w.rdb.SMembers(ctx, keyWebhooks(SystemTenant)).Result()
	if err != nil {
		return nil, fmt.Errorf("admin: list system subscriptions: %w", err)
	}
	ids := append(own, system...)
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// Enqueue writes d with SaveAndEnqueueOnceLua, as admin's live dispatch
// does, whatever subscription matching would say: delivery:{id} with a
// 14-day TTL, deliveries:{sub} scored by attempted_at millis, and an LPUSH
// onto dispatch:pending. It reports false (and writes nothing) when the
// delivery already exists. An empty DeliveryID means DeliveryID(EventID,
// SubscriptionID), a zero AttemptedAt now, an empty Status PENDING.
func (w *Writer) Enqueue(ctx context.Context, d Delivery) (bool, error) {
	if err := d.Validate(); err != nil {
		return false, err
	}
	if d.DeliveryID == "" {
		d.DeliveryID = DeliveryID(d.EventID, d.SubscriptionID)
	}
	if d.AttemptedAt.IsZero() {
		d.AttemptedAt = w.now()
	}
	return w.enqueueOnce(ctx, d)
}

func (w *Writer) enqueueOnce(ctx context.Context, d Delivery) (bool, error) {
	keys := []string{keyDelivery(d.DeliveryID), keyDeliveries(d.SubscriptionID), keyDispatchPending}
	score := strconv.FormatInt(d.AttemptedAt.UnixMilli(), 10)
	n, err := w.saveAndEnqueueOnce.Run(ctx, w.rdb, keys, d.JSON(), score, d.DeliveryID, deliveryTTLSeconds).Int()
	if err != nil {
		return false, fmt.Errorf("admin: enqueue delivery %s: %w", d.DeliveryID, err)
	}
	return n == 1, nil
}

// EnqueueRuntimeStyle writes d as cycles-server (runtime) does: a pipeline,
// not atomic and with no existence guard, of SET delivery:{id}, EXPIRE
// (14 days), ZADD deliveries:{sub} and LPUSH dispatch:pending. An empty
// DeliveryID gets a random "del_" id; it returns the id written.
func (w *Writer) EnqueueRuntimeStyle(ctx context.Context, d Delivery) (string, error) {
	if err := d.Validate(); err != nil {
		return "", err
	}
	if d.DeliveryID == "" {
		d.DeliveryID = NewRandomDeliveryID()
	}
	if d.AttemptedAt.IsZero() {
		d.AttemptedAt = w.now()
	}
	key := keyDelivery(d.DeliveryID)
	if _, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, d.JSON(), 0)
		p.Expire(ctx, key, deliveryTTLSeconds*time.Second)
		p.ZAdd(ctx, keyDeliveries(d.SubscriptionID), redis.Z{Score: float64(d.AttemptedAt.UnixMilli()), Member: d.DeliveryID})
		p.LPush(ctx, keyDispatchPending, d.DeliveryID)
		return nil
	}); err != nil {
		return "", fmt.Errorf("admin: enqueue delivery %s: %w", d.DeliveryID, err)
	}
	return d.DeliveryID, nil
}

// compactJSON strips insignificant whitespace from an already validated
// JSON value, leaving every token (numbers, escapes) as written, since
// Jackson writes records compactly.
func compactJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return raw, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, fmt.Errorf("admin: malformed JSON: %w", err)
	}
	return b.Bytes(), nil
}
