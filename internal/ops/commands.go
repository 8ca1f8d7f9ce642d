package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// filterFlags are the delivery filters list and requeue share.
type filterFlags struct {
	status, subscription, tenant, eventType, since, until string
}

func (f *filterFlags) register(c *command, statusHelp string) {
	c.fs.StringVar(&f.status, "status", "", statusHelp)
	c.fs.StringVar(&f.subscription, "subscription", "", "only this subscription's deliveries")
	c.fs.StringVar(&f.tenant, "tenant", "", "only deliveries of subscriptions this tenant owns (__system__ for admin-plane ones)")
	c.fs.StringVar(&f.eventType, "event-type", "", "only deliveries of this event type, e.g. budget.exhausted")
	c.fs.StringVar(&f.since, "since", "", "attempted at or after: RFC 3339 time, date (2026-11-24) or age (90m, 2h, 7d)")
	c.fs.StringVar(&f.until, "until", "", "attempted at or before (same forms as --since)")
}

func (f *filterFlags) filter(now time.Time) (Filter, error) {
	st, err := ParseStatuses(f.status)
	if err != nil {
		return Filter{}, err
	}
	out := Filter{Statuses: st, SubscriptionID: f.subscription, TenantID: f.tenant, EventType: f.eventType}
	if out.Since, err = parseTime("since", f.since, now); err != nil {
		return Filter{}, err
	}
	if out.Until, err = parseTime("until", f.until, now); err != nil {
		return Filter{}, err
	}
	return out, out.Validate()
}

func (f *filterFlags) any() bool {
	return f.status != "" || f.subscription != "" || f.tenant != "" || f.eventType != "" || f.since != "" || f.until != ""
}

func deliveriesList(ctx context.Context, args []string, o IO) error {
	c := newCommand("deliveries list", "deliveries list [filters] [--limit N] [--offset N] [--json]", o)
	var ff filterFlags
	ff.register(c, "PENDING, RETRYING, SUCCESS, FAILED, or undelivered (all but SUCCESS); comma-separated")
	limit := c.fs.Int("limit", 50, "deliveries per page (0: all)")
	offset := c.fs.Int("offset", 0, "skip this many matches (the next_offset of the previous page)")
	pos, cfg, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("deliveries list: unexpected argument %q (filters are flags, see --help)", pos[0])
	}
	if *limit < 0 || *offset < 0 {
		return fmt.Errorf("deliveries list: %w: --limit and --offset must not be negative", ErrBadFilter)
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return fmt.Errorf("deliveries list: %w", err)
	}
	t, closeAll, err := c.open(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer closeAll()
	page, err := t.List(ctx, f, *offset, *limit)
	if err != nil {
		return fmt.Errorf("deliveries list: %w", err)
	}
	return c.output(page, func(w io.Writer) error { return writeList(w, page) })
}

func deliveriesInspect(ctx context.Context, args []string, o IO) error {
	c := newCommand("deliveries inspect", "deliveries inspect DELIVERY_ID [--json]", o)
	c.managementFlag()
	pos, cfg, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("deliveries inspect: name one delivery id (got %d arguments)", len(pos))
	}
	t, closeAll, err := c.open(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer closeAll()
	replicas, _ := c.replicas(ctx, cfg)
	in, err := t.Inspect(ctx, pos[0], replicas)
	if err != nil {
		return fmt.Errorf("deliveries inspect: %w", err)
	}
	return c.output(in, func(w io.Writer) error { return writeInspection(w, in) })
}

func deliveriesRequeue(ctx context.Context, args []string, o IO) error {
	c := newCommand("deliveries requeue", "deliveries requeue DELIVERY_ID... | --status FAILED [filters] [--rate N] [--dry-run] [--json]", o)
	var ff filterFlags
	ff.register(c, "FAILED (the only status requeue resets); required when no ids are given")
	rate := c.fs.Float64("rate", 0, "requeue at most this many deliveries per second (0: no limit)")
	dryRun := c.fs.Bool("dry-run", false, "show what would be requeued; change nothing")
	pos, cfg, err := c.parse(args)
	if err != nil {
		return err
	}
	if *rate < 0 {
		return fmt.Errorf("deliveries requeue: %w: --rate must not be negative", ErrBadFilter)
	}
	switch {
	case len(pos) > 0 && ff.any():
		return fmt.Errorf("deliveries requeue: %w: give delivery ids or filters, not both", ErrBadFilter)
	case len(pos) == 0 && ff.status == "":
		return fmt.Errorf("deliveries requeue: %w: give delivery ids, or --status FAILED with optional filters", ErrBadFilter)
	}
	f, err := ff.filter(time.Now())
	if err != nil {
		return fmt.Errorf("deliveries requeue: %w", err)
	}
	// JetStream too: a PENDING or RETRYING id is requeued only when it is
	// proven stuck, in no queue of Redis or JetStream.
	t, closeAll, err := c.open(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer closeAll()
	opts := RequeueOptions{Rate: *rate, DryRun: *dryRun, Progress: newProgress(o.Stderr, o.tty(o.Stderr), "requeued")}
	if *dryRun {
		opts.Progress = nil
	}
	var res *RequeueResult
	if len(pos) > 0 {
		res, err = t.Requeue(ctx, pos, opts)
	} else {
		res, err = t.RequeueMatching(ctx, f, opts)
	}
	if err != nil {
		return fmt.Errorf("deliveries requeue: %w", err)
	}
	return c.output(res, func(w io.Writer) error { return writeRequeue(w, res) })
}

func quarantineList(ctx context.Context, args []string, o IO) error {
	c := newCommand("quarantine list", "quarantine list [--limit N] [--offset N] [--json]", o)
	limit := c.fs.Int64("limit", 50, "entries per page")
	offset := c.fs.Int64("offset", 0, "skip this many entries (newest first)")
	pos, cfg, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("quarantine list: unexpected argument %q", pos[0])
	}
	t, closeAll, err := c.open(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer closeAll()
	page, err := t.QuarantineList(ctx, *offset, *limit)
	if err != nil {
		return fmt.Errorf("quarantine list: %w", err)
	}
	return c.output(page, func(w io.Writer) error { return writeQuarantine(w, page) })
}

func quarantineRequeue(ctx context.Context, args []string, o IO) error {
	c := newCommand("quarantine requeue", "quarantine requeue DELIVERY_ID... | --all [--dry-run] [--json]", o)
	all := c.fs.Bool("all", false, "every entry whose delivery record is readable again")
	dryRun := c.fs.Bool("dry-run", false, "show what would be requeued; change nothing")
	pos, cfg, err := c.parse(args)
	if err != nil {
		return err
	}
	if *all && len(pos) > 0 {
		return fmt.Errorf("quarantine requeue: %w: give delivery ids or --all, not both", ErrBadFilter)
	}
	t, closeAll, err := c.open(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer closeAll()
	res, err := t.QuarantineRequeue(ctx, pos, *all, *dryRun)
	if err != nil {
		return fmt.Errorf("quarantine requeue: %w", err)
	}
	return c.output(res, func(w io.Writer) error { return writeRequeue(w, res) })
}

func status(ctx context.Context, args []string, o IO) error {
	c := newCommand("status", "status [--management-urls URL,...] [--json]", o)
	c.managementFlag()
	pos, cfg, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("status: unexpected argument %q", pos[0])
	}
	t, closeAll, err := c.open(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer closeAll()
	replicas, why := c.replicas(ctx, cfg)
	rep, err := t.Status(ctx, replicas)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	rep.ReplicasUnknown = why
	return c.output(rep, func(w io.Writer) error { return writeStatus(w, rep) })
}

func eventsEmit(ctx context.Context, args []string, o IO) error {
	c := newCommand("events emit", "events emit --tenant T --type TYPE [--data JSON] [--scope S] [--json]", o)
	var r EmitRequest
	var data string
	c.fs.StringVar(&r.TenantID, "tenant", "", "tenant the event belongs to (required; __system__ for admin-plane events)")
	c.fs.StringVar(&r.EventType, "type", "", "event type, e.g. budget.exhausted (required)")
	c.fs.StringVar(&data, "data", "", `event data, a JSON object, e.g. '{"ledger_id":"led_1","budget_id":"b_1"}'`)
	c.fs.StringVar(&r.Scope, "scope", "", "event scope, matched against subscriptions' scope filters")
	c.fs.StringVar(&r.CorrelationID, "correlation-id", "", "correlation id (indexed under events:correlation:{id})")
	c.fs.StringVar(&r.TraceID, "trace-id", "", "trace id (32 hex) for the event and its deliveries")
	pos, cfg, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("events emit: unexpected argument %q", pos[0])
	}
	if r.EventType == "" {
		return fmt.Errorf("events emit: %w: --type is required", ErrBadArgument)
	}
	if data != "" {
		if !json.Valid([]byte(data)) {
			return fmt.Errorf("events emit: %w: --data is not valid JSON", ErrBadArgument)
		}
		r.Data = json.RawMessage(data)
	}
	for _, w := range EmitWarnings(r) {
		fmt.Fprintln(o.Stderr, "warning:", w)
	}
	t, closeAll, err := c.open(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer closeAll()
	res, err := t.Emit(ctx, r)
	if err != nil {
		return fmt.Errorf("events emit: %w", err)
	}
	return c.output(res, func(w io.Writer) error { return writeEmit(w, res) })
}
