package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// Defaults applied by New.
const (
	DefaultPeriod = time.Minute
	DefaultMargin = 5 * time.Minute
	DefaultBatch  = 2000
)

// readBatch is how many records one pipelined read fetches.
const readBatch = 500

// Config tunes a Reconciler. The zero value of every field means its default.
type Config struct {
	// Queue names the dispatch stream and its subjects.
	Queue queue.Config
	// InstanceID names this reconciler in the lease (the bridge's id).
	InstanceID string
	// Period is the time between sweeps (default 1m); a delivery found
	// stuck is acted on at the next sweep, after a second look.
	Period time.Duration
	// Margin is how long past due a delivery must be before it can be
	// called stuck (default 5m): longer than any hop takes, so a delivery
	// moving between two places is never mistaken for a lost one.
	Margin time.Duration
	// MaxDeliveryAge is the stale cutoff (MAX_DELIVERY_AGE_MS, default
	// 24h): a stuck delivery older than it is failed, not put back.
	MaxDeliveryAge time.Duration
	// Batch is how many index entries one sweep reads (default 2000): a
	// large keyspace is covered over several sweeps, at a bounded cost each.
	Batch int
	// ScanLimit bounds the work items one look reads (DefaultScanLimit).
	ScanLimit int
	// Logger receives the reconciler's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	c.Queue = c.Queue.WithDefaults()
	if c.Period == 0 {
		c.Period = DefaultPeriod
	}
	if c.Margin == 0 {
		c.Margin = DefaultMargin
	}
	if c.MaxDeliveryAge == 0 {
		c.MaxDeliveryAge = 24 * time.Hour
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	var errs []error
	if c.InstanceID == "" {
		errs = append(errs, errors.New("instance id is empty"))
	}
	if c.Period <= 0 || c.Margin <= 0 || c.Batch < 1 || c.MaxDeliveryAge <= 0 {
		errs = append(errs, fmt.Errorf("period %s, margin %s, max age %s and batch %d must be positive", c.Period, c.Margin, c.MaxDeliveryAge, c.Batch))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("reconcile: invalid config: %w", err)
	}
	return c, nil
}

// Stats counts what a Reconciler did since New.
type Stats struct {
	// Sweeps is sweeps run while holding the lease.
	Sweeps uint64
	// Requeued is stuck deliveries put back on dispatch:pending.
	Requeued uint64
	// Failed is stuck deliveries failed at the stale cutoff.
	Failed uint64
	// Stuck is how many deliveries the last sweep found stuck (acted on
	// at the next one, after a second look).
	Stuck int
}

// Reconciler finds stuck deliveries and puts them back. Create it with New
// and Run it; Sweep runs one step by hand.
type Reconciler struct {
	st  *store.Store
	loc *Locator
	cfg Config
	log *slog.Logger

	// mu serialises sweeps; it guards the cursor and the suspects.
	mu sync.Mutex
	// subs are subscription ids read from webhooks:_all and not swept yet;
	// subCursor is the SSCAN cursor after them, scanning whether a pass
	// of webhooks:_all is under way.
	subs      []string
	subCursor uint64
	scanning  bool
	// sub is the subscription being swept and pos the last entry of its
	// index read.
	sub string
	pos store.IndexPos
	// suspects are deliveries found stuck by an earlier sweep, with the
	// record bytes they were judged on.
	suspects map[string]*store.DeliveryRecord

	sweeps, requeued, failed atomic.Uint64
	stuck                    atomic.Int64
}

// New returns a Reconciler over the Redis behind rdb and the dispatch
// stream reached through js.
func New(rdb store.Client, js jetstream.JetStream, cfg Config) (*Reconciler, error) {
	if rdb == nil || js == nil {
		return nil, errors.New("reconcile: Redis client and JetStream are required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st := store.NewWithOptions(rdb, store.Options{})
	return &Reconciler{
		st:       st,
		loc:      NewLocator(st, js, cfg.Queue, cfg.ScanLimit),
		cfg:      cfg,
		log:      cfg.Logger.With("component", "reconciler", "instance_id", cfg.InstanceID),
		suspects: map[string]*store.DeliveryRecord{},
	}, nil
}

// Stats returns the counters. It is safe to call while Run runs.
func (r *Reconciler) Stats() Stats {
	return Stats{Sweeps: r.sweeps.Load(), Requeued: r.requeued.Load(), Failed: r.failed.Load(), Stuck: int(r.stuck.Load())}
}

// Run sweeps every Period until ctx is done, then returns nil. Only the
// bridge holding the lease (store.ReconcileLockKey) sweeps: a lease of
// three periods, renewed by each sweep, so a dead holder is replaced
// within three periods and two bridges never act on the same suspects.
func (r *Reconciler) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Period)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := r.step(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			r.log.Warn("reconcile sweep failed; retrying every period", "err", err)
			failing = true
		case err == nil && failing:
			r.log.Info("reconcile sweeps work again")
			failing = false
		}
	}
}

// step takes or renews the lease and sweeps when it holds it.
func (r *Reconciler) step(ctx context.Context) error {
	lead, err := r.st.Lead(ctx, store.ReconcileLockKey, r.cfg.InstanceID, 3*r.cfg.Period)
	if err != nil {
		return err
	}
	if !lead {
		r.forget()
		return nil
	}
	_, err = r.Sweep(ctx)
	return err
}

// forget drops what this reconciler learnt while it held the lease: the
// next holder's look is the one that counts.
func (r *Reconciler) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.suspects)
	r.subs, r.subCursor, r.scanning, r.sub, r.pos = nil, 0, false, "", store.IndexPos{}
	r.stuck.Store(0)
}

// SweepResult is what one sweep did.
type SweepResult struct {
	// Read is index entries read; Stuck deliveries found stuck (acted on
	// at the next sweep); Requeued put back; Failed failed as stale.
	Read, Stuck, Requeued, Failed int
}

// Sweep runs one step: it acts on the suspects an earlier sweep found
// (if a second look finds them still stuck, with the same record), then
// reads up to Batch more index entries and notes the stuck ones among
// them as suspects. Callers other than Run must hold the lease or be alone.
func (r *Reconciler) Sweep(ctx context.Context) (SweepResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res SweepResult
	if err := r.confirm(ctx, &res); err != nil {
		return res, err
	}
	if err := r.scan(ctx, &res); err != nil {
		return res, err
	}
	res.Stuck = len(r.suspects)
	r.stuck.Store(int64(res.Stuck))
	r.sweeps.Add(1)
	if err := r.st.RecordSweep(ctx, r.cfg.InstanceID, r.cfg.Now(), res.Stuck, res.Requeued, res.Failed); err != nil {
		return res, err
	}
	return res, nil
}

// confirm looks at every suspect again and acts on those still stuck.
func (r *Reconciler) confirm(ctx context.Context, res *SweepResult) error {
	if len(r.suspects) == 0 {
		return nil
	}
	ids := make([]string, 0, len(r.suspects))
	for id := range r.suspects {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for chunk := range slices.Chunk(ids, readBatch) {
		recs, err := r.reread(ctx, chunk)
		if err != nil {
			return err
		}
		stuck, err := r.stuckOf(ctx, recs)
		if err != nil {
			return err
		}
		for _, rec := range stuck {
			if err := r.act(ctx, rec, res); err != nil {
				return err
			}
		}
		for _, id := range chunk {
			delete(r.suspects, id)
		}
	}
	return nil
}

// reread reads ids' records again and keeps those unchanged since they
// were judged stuck: any write means something handled the delivery.
func (r *Reconciler) reread(ctx context.Context, ids []string) ([]*store.DeliveryRecord, error) {
	got, err := r.st.Deliveries(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []*store.DeliveryRecord
	for _, g := range got {
		if g.Err == nil && string(g.Record.Raw) == string(r.suspects[g.ID].Raw) {
			out = append(out, g.Record)
		}
	}
	return out, nil
}

// act puts rec back, or fails it when it is past the stale cutoff. Both
// are conditional on the record still holding rec.Raw.
func (r *Reconciler) act(ctx context.Context, rec *store.DeliveryRecord, res *SweepResult) error {
	now := r.cfg.Now()
	log := r.log.With("delivery_id", rec.DeliveryID, "subscription_id", rec.SubscriptionID, "status", rec.Status)
	// The stale cutoff counts from attempted_at, as the engine's does (a
	// record without one is not stale).
	created := now
	if rec.AttemptedAt != nil {
		created = rec.AttemptedAt.Time
	}
	if age := now.Sub(created); age > r.cfg.MaxDeliveryAge {
		msg := proto.ExpiredMessage(age, r.cfg.MaxDeliveryAge)
		done, err := r.st.FailExpired(ctx, rec, msg, now)
		if err != nil {
			return err
		}
		if done {
			res.Failed++
			r.failed.Add(1)
			log.Warn("stuck delivery failed at the stale cutoff: it was in no queue", "error_message", msg)
		}
		return nil
	}
	done, err := r.st.PutBack(ctx, rec)
	if err != nil {
		return err
	}
	if done {
		res.Requeued++
		r.requeued.Add(1)
		log.Warn("stuck delivery put back on dispatch:pending: it was neither terminal nor in any queue", "attempts", rec.Attempts)
	}
	return nil
}

// stuckOf returns the records among recs that are stuck now: not terminal,
// due more than Margin ago, and found nowhere by two looks in a row (a
// second look catches a delivery that moved backwards, from a work item to
// a wake-up, while the first one ran).
func (r *Reconciler) stuckOf(ctx context.Context, recs []*store.DeliveryRecord) ([]*store.DeliveryRecord, error) {
	for range 2 {
		now := r.cfg.Now()
		var due []*store.DeliveryRecord
		for _, rec := range recs {
			if !rec.Status.Terminal() && now.Sub(Due(rec.Delivery, 0)) > r.cfg.Margin {
				due = append(due, rec)
			}
		}
		if len(due) == 0 {
			return nil, nil
		}
		ds := make([]*proto.Delivery, len(due))
		for i, rec := range due {
			ds[i] = rec.Delivery
		}
		places, err := r.loc.Locate(ctx, ds)
		if err != nil {
			return nil, err
		}
		recs = recs[:0:0]
		for i, p := range places {
			if Stuck(p, Due(due[i].Delivery, 0), now, r.cfg.Margin) {
				recs = append(recs, due[i])
			}
		}
	}
	return recs, nil
}

// scan reads up to Batch index entries from where the last sweep stopped,
// and notes the stuck deliveries among them as suspects.
func (r *Reconciler) scan(ctx context.Context, res *SweepResult) error {
	maxMs := r.cfg.Now().Add(-r.cfg.Margin).UnixMilli()
	for res.Read < r.cfg.Batch {
		if r.sub == "" {
			more, err := r.nextSubscription(ctx)
			if err != nil || !more {
				return err
			}
		}
		page, err := r.st.IndexPage(ctx, r.sub, r.pos, maxMs, min(readBatch, r.cfg.Batch-res.Read))
		if err != nil {
			return err
		}
		if len(page) == 0 {
			r.sub, r.pos = "", store.IndexPos{}
			continue
		}
		res.Read += len(page)
		last := page[len(page)-1]
		r.pos = store.IndexPos{Score: last.AttemptedAtMs, Member: last.ID}
		if err := r.judge(ctx, page); err != nil {
			return err
		}
	}
	return nil
}

// nextSubscription makes the next subscription of webhooks:_all current.
// It reports false when a pass over webhooks:_all just ended: the sweep
// stops there, and the next one starts a new pass.
func (r *Reconciler) nextSubscription(ctx context.Context) (bool, error) {
	for len(r.subs) == 0 {
		if r.scanning && r.subCursor == 0 {
			r.scanning = false
			return false, nil
		}
		ids, next, err := r.st.ScanSubscriptions(ctx, r.subCursor, 100)
		if err != nil {
			return false, err
		}
		r.subs, r.subCursor, r.scanning = ids, next, true
	}
	r.sub, r.subs = r.subs[0], r.subs[1:]
	r.pos = store.IndexPos{}
	return true, nil
}

// judge reads page's records and notes the stuck ones as suspects.
func (r *Reconciler) judge(ctx context.Context, page []store.IndexedDelivery) error {
	ids := make([]string, len(page))
	for i, e := range page {
		ids[i] = e.ID
	}
	got, err := r.st.Deliveries(ctx, ids)
	if err != nil {
		return err
	}
	var recs []*store.DeliveryRecord
	for _, g := range got {
		// A missing record expired or was deleted; an unreadable one is
		// the engine's to quarantine when it meets it.
		if g.Err == nil && r.suspects[g.ID] == nil {
			recs = append(recs, g.Record)
		}
	}
	stuck, err := r.stuckOf(ctx, recs)
	if err != nil {
		return err
	}
	for _, rec := range stuck {
		if len(r.suspects) >= r.cfg.Batch {
			break // the rest are found again by a later pass
		}
		r.suspects[rec.DeliveryID] = rec
		r.log.Info("delivery found stuck: neither terminal nor queued anywhere; acting at the next sweep if it still is",
			"delivery_id", rec.DeliveryID, "subscription_id", rec.SubscriptionID, "status", rec.Status)
	}
	return nil
}
