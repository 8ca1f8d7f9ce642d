package soak

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Where a delivery can be queued.
const (
	placePending    = "dispatch:pending"
	placeRetry      = "dispatch:retry"
	placeProcessing = "dispatch:processing"
	placeWork       = "stream work item"
	placeSchedule   = "stream wake-up"
	placeHeld       = "stream held"
)

// refusals are the error messages (prefixes, as the engine writes them) of
// the named refusals that may fail a delivery without a send of its own.
var refusals = []string{
	"Delivery expired",                  // stale cutoff
	"Event not found",                   // event record gone
	"Subscription not found",            // subscription deleted
	"Subscription not active",           // inactive (JETRELAY_INACTIVE_SUBSCRIPTIONS=fail)
	"Ownership boundary",                // #209
	"Webhook signing secret is missing", // missing secret
}

func namedRefusal(msg string) bool {
	for _, p := range refusals {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	l := strings.ToLower(msg)
	return strings.Contains(l, "ssrf") || strings.Contains(l, "blocked")
}

// records reads every delivery of a keyspace: the ids the writer got back
// and any other delivery:* record (an emit that failed part-way). A nil
// value is an id with no record.
func (s *soak) records(ctx context.Context, sp *keyspace) (map[string]*proto.Delivery, error) {
	sp.mu.Lock()
	ids := slices.Clone(sp.ids)
	sp.mu.Unlock()
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	iter := sp.rdb.Scan(ctx, 0, "delivery:*", 1000).Iterator()
	for iter.Next(ctx) {
		if id := strings.TrimPrefix(iter.Val(), "delivery:"); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	out := make(map[string]*proto.Delivery, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		keys := make([]string, len(chunk))
		for i, id := range chunk {
			keys[i] = store.DeliveryKey(id)
		}
		vals, err := sp.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			str, ok := v.(string)
			if !ok {
				out[chunk[i]] = nil
				continue
			}
			d, err := proto.ParseDelivery([]byte(str))
			if err != nil {
				return nil, fmt.Errorf("delivery %s unreadable: %w", chunk[i], err)
			}
			out[chunk[i]] = d
		}
	}
	return out, nil
}

// statuses reads every subscription's status in a keyspace.
func (s *soak) statuses(ctx context.Context, sp *keyspace) (map[string]proto.SubscriptionStatus, error) {
	out := map[string]proto.SubscriptionStatus{}
	for _, ep := range sp.eps {
		raw, err := sp.rdb.Get(ctx, store.SubscriptionKey(ep.subID)).Bytes()
		if err != nil {
			return nil, err
		}
		sub, err := proto.ParseSubscription(raw)
		if err != nil {
			return nil, err
		}
		out[ep.subID] = sub.Status
	}
	return out, nil
}

// redisPlaces lists where Redis queues each delivery id: the pending list,
// every processing list, the legacy retry ZSET.
func (s *soak) redisPlaces(ctx context.Context, sp *keyspace, places map[string][]string) error {
	pending, err := sp.rdb.LRange(ctx, store.PendingList, 0, -1).Result()
	if err != nil {
		return err
	}
	for _, id := range pending {
		places[id] = append(places[id], placePending)
	}
	retry, err := sp.rdb.ZRange(ctx, store.RetryZSet, 0, -1).Result()
	if err != nil {
		return err
	}
	for _, id := range retry {
		places[id] = append(places[id], placeRetry)
	}
	iter := sp.rdb.Scan(ctx, 0, placeProcessing+"*", 100).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if t, err := sp.rdb.Type(ctx, key).Result(); err != nil || t != "list" {
			continue
		}
		ids, err := sp.rdb.LRange(ctx, key, 0, -1).Result()
		if err != nil {
			return err
		}
		for _, id := range ids {
			places[id] = append(places[id], key)
		}
	}
	return iter.Err()
}

// streamPlaces lists the work items, wake-ups and held deliveries stored in
// a keyspace's dispatch stream, reading each stored message once (next by
// subject skips the deleted ones).
func (s *soak) streamPlaces(ctx context.Context, sp *keyspace, places map[string][]string) error {
	nc, err := nats.Connect(sp.natsURL, nats.Timeout(5*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	qc := queue.Config{}.WithDefaults()
	stream, err := js.Stream(ctx, qc.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for seq := uint64(1); ; {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read stream message %d: %w", seq, err)
		}
		seq = m.Sequence + 1
		if m.Header.Get(queue.HeldCheckHeader) != "" || qc.IsKeeper(m.Subject) {
			continue
		}
		id := string(m.Data)
		switch {
		case m.Subject == qc.Subject:
			places[id] = append(places[id], placeWork)
		case strings.HasPrefix(m.Subject, qc.Subject+".sched."):
			places[id] = append(places[id], placeSchedule)
		case strings.HasPrefix(m.Subject, qc.Subject+".held."):
			places[id] = append(places[id], placeHeld)
		default:
			places[id] = append(places[id], m.Subject)
		}
	}
}

// unsettled counts the deliveries not final yet, but for those held for a
// subscription that is not ACTIVE.
func (s *soak) unsettled(ctx context.Context) (int, error) {
	open := 0
	for _, sp := range s.spaces {
		recs, err := s.records(ctx, sp)
		if err != nil {
			return -1, err
		}
		subs, err := s.statuses(ctx, sp)
		if err != nil {
			return -1, err
		}
		for _, d := range recs {
			if d == nil || (!d.Status.Terminal() && subs[d.SubscriptionID] == proto.SubscriptionActive) {
				open++
			}
		}
	}
	return open, nil
}

// check examines every delivery once the run has settled.
func (s *soak) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	r := s.rep
	for _, sp := range s.spaces {
		sp.mu.Lock()
		r.Emitted += len(sp.ids)
		r.EmitErrors += sp.emitErrs
		sp.mu.Unlock()
		if err := s.checkSpace(ctx, sp); err != nil {
			return fmt.Errorf("soak: check %s keyspace: %w", sp.name, err)
		}
	}
	r.Requests, r.BadSignatures = s.recv.stats()
	if r.BadSignatures > 0 {
		r.violate(CheckSignature, "", fmt.Sprintf("%d requests whose X-Cycles-Signature did not verify", r.BadSignatures))
	}
	r.Duplicates, r.Receipts = s.recv.duplicates()
	s.wmu.Lock()
	for _, w := range s.windows {
		r.DuplicateBound += s.recv.exposed(w.from.Add(-time.Second), w.to)
	}
	s.wmu.Unlock()
	if r.Duplicates > r.DuplicateBound {
		r.violate(CheckDuplicates, "", fmt.Sprintf("%d duplicate 2xx receipts, more than the %d sends in flight around the faults", r.Duplicates, r.DuplicateBound))
	}
	r.Checked = true
	return nil
}

func (s *soak) checkSpace(ctx context.Context, sp *keyspace) error {
	r := s.rep
	recs, err := s.records(ctx, sp)
	if err != nil {
		return err
	}
	subs, err := s.statuses(ctx, sp)
	if err != nil {
		return err
	}
	places := map[string][]string{}
	if err := s.redisPlaces(ctx, sp, places); err != nil {
		return err
	}
	if err := s.streamPlaces(ctx, sp, places); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(recs)) {
		d := recs[id]
		if d == nil {
			r.Lost++
			r.violate(CheckLost, id, "admin enqueued it, and its delivery record is gone")
			continue
		}
		r.Deliveries++
		at := places[id]
		if len(at) > 1 {
			r.violate(CheckOnePlace, id, "queued in two places at once: "+strings.Join(at, " + "))
		}
		active := subs[d.SubscriptionID] == proto.SubscriptionActive
		switch {
		case d.Status == proto.DeliverySuccess:
			r.Success++
			if s.recv.receipt(d.SubscriptionID, d.EventID) == 0 {
				r.violate(CheckReceipt, id, "SUCCESS, but the receiver answered no signed 2xx for its event")
			}
		case d.Status == proto.DeliveryFailed:
			r.Failed++
			msg := ""
			if d.ErrorMessage != nil {
				msg = *d.ErrorMessage
			}
			if s.recv.receipt(d.SubscriptionID, d.EventID) > 0 {
				r.FailedReceived++
			}
			switch {
			case d.Attempts >= 1:
			case namedRefusal(msg):
				r.FailedRefused++
			default:
				r.WronglyFailed++
				r.violate(CheckFailedEvidence, id, fmt.Sprintf("FAILED with attempts 0 and %q: never sent, no named refusal", msg))
			}
		case len(at) == 0:
			r.Lost++
			r.violate(CheckLost, describe(d), "not final and queued nowhere (no Redis list, work item, wake-up or held message)")
		case !active:
			r.Held++
		default:
			r.Stranded++
			r.violate(CheckTerminal, describe(d)+" in "+strings.Join(at, " + "), "not final on an ACTIVE subscription after the settle deadline")
		}
		if d.Status.Terminal() && len(at) > 0 {
			r.Leftover++
		}
	}
	return nil
}

// describe names a delivery that is not final with what its record says.
func describe(d *proto.Delivery) string {
	out := fmt.Sprintf("%s (%s, attempts %d", d.DeliveryID, d.Status, d.Attempts)
	if d.NextRetryAt != nil {
		out += ", next_retry_at " + proto.FormatInstant(d.NextRetryAt.Time)
	}
	if d.Waiting != nil {
		out += ", waiting " + *d.Waiting
	}
	return out + ")"
}
