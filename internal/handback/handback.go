package handback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// legacyDeferredZSet is where jetrelay releases before message schedules
// parked put-off deliveries (member delivery id, score due epoch millis);
// a current bridge empties it at start, but a rollback may follow an
// upgrade that never started.
const legacyDeferredZSet = store.LegacyDeferredZSet

// ErrRunning is returned when a part of jetrelay still runs: handing work
// back then would race the bridge refilling the stream and the engine
// sending what is being handed back.
var ErrRunning = errors.New("handback: jetrelay is still running; stop every jetrelay process first")

// handBackLua writes one id where the reference reads it, unless a reference
// key already holds it (a run interrupted after its Redis write):
// dispatch:pending (LPUSH, as admin enqueues) when ARGV[2] is empty,
// dispatch:retry scored ARGV[2] otherwise. With a third key (the legacy
// jetrelay:deferred ZSET, or a subscription's parked deliveries) it also
// removes the id from there, in the same step. LPOS needs Redis 6.0.6.
//
//	KEYS = [dispatch:pending, dispatch:retry, (jetrelay:deferred)]  ARGV = [id, due ms or ""]
//	returns 1 written, 0 already there
const handBackLua = `
if KEYS[3] then redis.call('ZREM', KEYS[3], ARGV[1]) end
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
if redis.call('LPOS', KEYS[1], ARGV[1]) then return 0 end
if ARGV[2] == '' then
  redis.call('LPUSH', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
end
return 1`

// moveListLua hands back the oldest id of a processing list (its right
// end) to dispatch:pending and removes it, in one step. KEYS = [list,
// dispatch:pending, dispatch:retry]; returns 1 written, 0 already in a
// reference key, -1 when the list is empty.
const moveListLua = `
local id = redis.call('RPOP', KEYS[1])
if not id then return -1 end
if redis.call('ZSCORE', KEYS[3], id) or redis.call('LPOS', KEYS[2], id) then return 0 end
redis.call('LPUSH', KEYS[2], id)
return 1`

// Report says what a hand-back did.
type Report struct {
	Pending   int // ids written to dispatch:pending
	Retry     int // ids written to dispatch:retry with their due time
	Present   int // ids a reference key already held (not written again)
	Removed   int // work items removed from the stream after their id was written
	Checks    int // held-check wake-ups removed (jetrelay's own, no delivery in them)
	Unhandled int // messages left in the stream: not work items jetrelay wrote
}

// Config names where jetrelay keeps its work.
type Config struct {
	Queue  queue.Config
	Logger *slog.Logger // nil discards

	afterRead func(seq uint64) // export_test.go
}

// Run hands back everything jetrelay holds. It returns ErrRunning (wrapped,
// naming what runs and until when its heartbeat lasts) without changing
// anything while a bridge's or an engine's heartbeat is alive.
func Run(ctx context.Context, rdb redis.UniversalClient, js jetstream.JetStream, cfg Config) (Report, error) {
	h := &handback{rdb: rdb, js: js, qc: cfg.Queue.WithDefaults(), log: cfg.Logger, afterRead: cfg.afterRead,
		store: store.New(rdb), script: redis.NewScript(handBackLua)}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if err := h.checkStopped(ctx); err != nil {
		return h.rep, err
	}
	steps := []func(context.Context) error{h.resetConsumer, h.processingLists, h.deferred, h.parked, h.stream}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return h.rep, err
		}
	}
	return h.rep, nil
}

type handback struct {
	afterRead func(seq uint64) // test hook: a message was read, not yet handled
	store     *store.Store
	script    *redis.Script // handBackLua
	rdb       redis.UniversalClient
	js        jetstream.JetStream
	qc        queue.Config
	log       *slog.Logger
	rep       Report
}

// checkStopped refuses while any jetrelay replica's heartbeat is alive: a
// bridge (it would refill the stream) or an engine (it would send what is
// being handed back). Heartbeats are a positive signal: the consumer's state
// is not, since the server keeps the items a killed engine held, and those
// it released with a delay, pending on the consumer until they are acked,
// terminated or deleted, however long everyone has been stopped.
func (h *handback) checkStopped(ctx context.Context) error {
	live, err := h.store.LiveReplicas(ctx)
	if err != nil {
		return fmt.Errorf("handback: %w", err)
	}
	if len(live) == 0 {
		return nil
	}
	names := make([]string, len(live))
	for i, r := range live {
		names[i] = r.String()
	}
	return fmt.Errorf("%w: %s. A process killed without a clean stop counts as running until its heartbeat expires (%s for engines, %s for bridges by default); run handback again after that",
		ErrRunning, strings.Join(names, "; "), store.EngineHeartbeatTTL, bridge.DefaultHeartbeatTTL)
}

// resetConsumer deletes the engines' durable consumer (`jetrelay run`
// creates it again). Its pending set still names the items a killed engine
// held or released with a delay; those are read from the stream like any
// other, and without the consumer nothing can be handed to an engine while
// they are handed back.
func (h *handback) resetConsumer(ctx context.Context) error {
	names := []string{h.qc.Consumer}
	// The ordered lines' consumers (one per ordered subscription) hold
	// pending and pinning state of their own.
	st, err := h.js.Stream(ctx, h.qc.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("handback: stream %s: %w", h.qc.Stream, err)
	}
	lister := st.ConsumerNames(ctx)
	for name := range lister.Name() {
		if strings.HasPrefix(name, h.qc.OrderedConsumerPrefix()) {
			names = append(names, name)
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("handback: list consumers of %s: %w", h.qc.Stream, err)
	}
	for _, name := range names {
		err := h.js.DeleteConsumer(ctx, h.qc.Stream, name)
		switch {
		case err == nil:
			h.log.Info("engine consumer removed; jetrelay run creates it again", "consumer", name)
		case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrConsumerNotFound):
		default:
			return fmt.Errorf("handback: remove consumer %s: %w", name, err)
		}
	}
	return nil
}

// processingLists hands back the ids every bridge moved out of
// dispatch:pending without a confirmed publication.
func (h *handback) processingLists(ctx context.Context) error {
	ids, err := h.rdb.SMembers(ctx, bridge.RegistryKey).Result()
	if err != nil {
		return fmt.Errorf("handback: read %s: %w", bridge.RegistryKey, err)
	}
	script := redis.NewScript(moveListLua)
	for _, owner := range ids {
		list := bridge.ProcessingKey(owner)
		for {
			n, err := script.Run(ctx, h.rdb, []string{list, store.PendingList, store.RetryZSet}).Int()
			if err != nil {
				return fmt.Errorf("handback: hand back %s: %w", list, err)
			}
			if n < 0 {
				break
			}
			h.count(n, false)
		}
	}
	return nil
}

// deferred hands back the legacy jetrelay:deferred ZSET: a retry keeps the
// time it is due, anything else parked there (put off for a breaker, a busy
// or paused subscription) is due now.
func (h *handback) deferred(ctx context.Context) error {
	for {
		zs, err := h.rdb.ZRangeWithScores(ctx, legacyDeferredZSet, 0, 255).Result()
		if err != nil {
			return fmt.Errorf("handback: read %s: %w", legacyDeferredZSet, err)
		}
		if len(zs) == 0 {
			return nil
		}
		for _, z := range zs {
			id, _ := z.Member.(string)
			due := time.UnixMilli(int64(z.Score))
			if err := h.handBack(ctx, id, due, legacyDeferredZSet); err != nil {
				return err
			}
		}
	}
}

// parked hands back the deliveries bridges left in Redis under intake
// holds (store.ParkedZSet): never sent, so each is due now, in
// dispatch:pending. The holds go too: they mean nothing to the reference.
func (h *handback) parked(ctx context.Context) error {
	subs, err := h.store.ParkedSubs(ctx)
	if err != nil {
		return fmt.Errorf("handback: %w", err)
	}
	for _, sub := range subs {
		for {
			ids, err := h.store.OldestParked(ctx, sub, 256)
			if err != nil {
				return fmt.Errorf("handback: %w", err)
			}
			if len(ids) == 0 {
				break
			}
			for _, id := range ids {
				if err := h.handBack(ctx, id, time.Time{}, store.ParkedZSet(sub)); err != nil {
					return err
				}
			}
		}
	}
	if err := h.rdb.Del(ctx, store.ParkedSubscriptions, store.IntakeHolds).Err(); err != nil {
		return fmt.Errorf("handback: remove the intake holds: %w", err)
	}
	return nil
}

// handBack writes id to dispatch:pending, or to dispatch:retry when its
// record says it is RETRYING and due is set: only a retry has a time the
// reference must wait for. from, when set, is a ZSET to remove id from in
// the same step.
func (h *handback) handBack(ctx context.Context, id string, due time.Time, from string) error {
	dueArg := ""
	if !due.IsZero() {
		rec, err := h.store.Delivery(ctx, id)
		switch {
		case err == nil && rec.Status == proto.DeliveryRetrying:
			dueArg = strconv.FormatInt(due.UnixMilli(), 10)
		case err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt):
			return fmt.Errorf("handback: read %s: %w", id, err)
		}
	}
	keys := []string{store.PendingList, store.RetryZSet}
	if from != "" {
		keys = append(keys, from)
	}
	n, err := h.script.Run(ctx, h.rdb, keys, id, dueArg).Int()
	if err != nil {
		return fmt.Errorf("handback: hand back %s: %w", id, err)
	}
	h.count(n, dueArg != "")
	return nil
}

// stream hands back everything jetrelay keeps in the dispatch stream. The
// server fires a wake-up when it is due, during the scan too (every overdue
// one fires as soon as the server starts): the fired work item is stored at
// a higher sequence and the wake-up removed. So wake-ups are handed back
// first, each removed before it can fire; then the whole stream is walked,
// to its end as it grows, until a walk finds nothing of jetrelay's left.
func (h *handback) stream(ctx context.Context) error {
	s, err := h.js.Stream(ctx, h.qc.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("handback: open stream %s: %w", h.qc.Stream, err)
	}
	if _, err := h.walk(ctx, s, h.qc.ScheduleSubjects()); err != nil {
		return err
	}
	for {
		before := h.rep.Removed + h.rep.Checks
		unhandled, err := h.walk(ctx, s, ">")
		if err != nil {
			return err
		}
		if h.rep.Removed+h.rep.Checks == before {
			h.rep.Unhandled = unhandled
			return nil
		}
	}
}

// walk hands back every message on subjects matching filter, oldest first,
// reading each next one from the server (so gaps cost nothing and messages
// stored meanwhile are reached): a work item's id is written to Redis, then
// its message deleted. It returns how many messages it left (not jetrelay's).
func (h *handback) walk(ctx context.Context, s jetstream.Stream, filter string) (unhandled int, err error) {
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return unhandled, nil
		}
		if err != nil {
			return unhandled, fmt.Errorf("handback: read the stream from %d: %w", seq, err)
		}
		seq = m.Sequence + 1
		if h.afterRead != nil {
			h.afterRead(m.Sequence)
		}
		if h.qc.IsKeeper(m.Subject) {
			// A bridge's keeper (queue.Keep): no work, and nothing
			// renews it while jetrelay is stopped.
			if err := h.delete(ctx, s, m.Sequence); err != nil {
				return unhandled, fmt.Errorf("handback: remove the keeper %d: %w", m.Sequence, err)
			}
			continue
		}
		if m.Header.Get(queue.HeldCheckHeader) != "" {
			// A subscription's held-check: the held deliveries it would
			// release are handed back themselves.
			if err := h.delete(ctx, s, m.Sequence); err != nil {
				return unhandled, fmt.Errorf("handback: remove held-check %d: %w", m.Sequence, err)
			}
			h.rep.Checks++
			continue
		}
		id, due, ok := h.workItem(m)
		if !ok {
			unhandled++
			h.log.Warn("message left in the stream: not a work item", "seq", m.Sequence, "subject", m.Subject)
			continue
		}
		if err := h.handBack(ctx, id, due, ""); err != nil {
			return unhandled, err
		}
		// Only now: the id is in Redis, so removing it loses nothing. A
		// wake-up that fired meanwhile is gone already; its work item is
		// further on, and its id is in Redis.
		if err := h.delete(ctx, s, m.Sequence); err != nil {
			return unhandled, fmt.Errorf("handback: remove message %d (%s, already handed back): %w", m.Sequence, id, err)
		}
		h.rep.Removed++
	}
}

// delete removes message seq; one that is gone already (a wake-up that
// fired) is fine. The server reports that as a failed deletion ("no message
// found", err_code 10057), not as ErrMsgNotFound, so a failure is checked
// against the stream.
func (h *handback) delete(ctx context.Context, s jetstream.Stream, seq uint64) error {
	err := s.DeleteMsg(ctx, seq)
	if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if _, gerr := s.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
		return nil
	}
	return err
}

// count adds one handed-back id to the report: written is the hand-back
// script's 1 (written) or 0 (a reference key already held it).
func (h *handback) count(written int, retry bool) {
	switch {
	case written == 0:
		h.rep.Present++
	case retry:
		h.rep.Retry++
	default:
		h.rep.Pending++
	}
}

// workItem returns the delivery id of a stored message and, for a message
// schedule, when it is due; ok is false for anything jetrelay did not write.
func (h *handback) workItem(m *jetstream.RawStreamMsg) (id string, due time.Time, ok bool) {
	id = string(m.Data)
	if queue.ValidateDeliveryID(id) != nil {
		return "", time.Time{}, false
	}
	switch subj := m.Subject; {
	case subj == h.qc.Subject, strings.HasPrefix(subj, h.qc.Subject+".held."):
		return id, time.Time{}, true
	case strings.HasPrefix(subj, h.qc.Subject+".ordered."):
		// An ordered line's item: handed back in stream order, which is
		// its line's order (docs/ordering.md).
		return id, time.Time{}, true
	case strings.HasPrefix(subj, h.qc.Subject+".sched."):
		at, found := strings.CutPrefix(m.Header.Get(queue.ScheduleHeader), "@at ")
		if t, err := time.Parse(time.RFC3339Nano, at); found && err == nil {
			return id, t, true
		}
		// A schedule without a readable time is due now.
		return id, time.Time{}, true
	}
	return "", time.Time{}, false
}
