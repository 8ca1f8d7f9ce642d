package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/config"
)

// filterFlags are the delivery filters list and requeue share.
type filterFlags struct {
	status, subscription, tenant, eventType, since, until string
}

func (f *filterFlags) register(c *command, statusHelp string) {
	c.flags().StringVar(&f.status, "status", "", statusHelp)
	c.flags().StringVar(&f.subscription, "subscription", "", "only this subscription's deliveries")
	c.flags().StringVar(&f.tenant, "tenant", "", "only deliveries of subscriptions this tenant owns (__system__ for admin-plane ones)")
	c.flags().StringVar(&f.eventType, "event-type", "", "only deliveries of this event type, e.g. budget.exhausted")
	c.flags().StringVar(&f.since, "since", "", "attempted at or after: RFC 3339 time, date (2026-11-24) or age (90m, 2h, 7d)")
	c.flags().StringVar(&f.until, "until", "", "attempted at or before (same forms as --since)")
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

func deliveriesList(getenv func(string) string) *cobra.Command {
	c := newCommand("list [filters] [--limit N] [--offset N]", "list deliveries by status, subscription, tenant, event type and attempt time, a page at a time", cli.NoArgs, getenv)
	var ff filterFlags
	ff.register(c, "PENDING, RETRYING, SUCCESS, FAILED, or undelivered (all but SUCCESS); comma-separated")
	limit := c.flags().Int("limit", 50, "deliveries per page (0: all)")
	offset := c.flags().Int("offset", 0, "skip this many matches (the next_offset of the previous page)")
	return c.runs(func(ctx context.Context, _ []string, cfg *config.Config) error {
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
	})
}

func deliveriesInspect(getenv func(string) string) *cobra.Command {
	c := newCommand("inspect DELIVERY_ID", "the record, its event and subscription, attempts, where it is now and what happens next", cli.ExactArgs(1, "one delivery id"), getenv)
	c.managementFlag()
	return c.runs(func(ctx context.Context, pos []string, cfg *config.Config) error {
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
	})
}

func deliveriesRequeue(getenv func(string) string) *cobra.Command {
	c := newCommand("requeue DELIVERY_ID... | --status FAILED [filters]", "back to PENDING, attempts reset, sent again once", nil, getenv)
	var ff filterFlags
	ff.register(c, "FAILED (the only status requeue resets); required when no ids are given")
	rate := c.flags().Float64("rate", 0, "requeue at most this many deliveries per second (0: no limit)")
	dryRun := c.flags().Bool("dry-run", false, "show what would be requeued; change nothing")
	return c.runs(func(ctx context.Context, pos []string, cfg *config.Config) error {
		o := c.io
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
	})
}

func quarantineList(getenv func(string) string) *cobra.Command {
	c := newCommand("list [--limit N] [--offset N]", "entries of dispatch:failed (work items that could not be processed), newest first", cli.NoArgs, getenv)
	limit := c.flags().Int64("limit", 50, "entries per page")
	offset := c.flags().Int64("offset", 0, "skip this many entries (newest first)")
	return c.runs(func(ctx context.Context, _ []string, cfg *config.Config) error {
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
	})
}

func quarantineRequeue(getenv func(string) string) *cobra.Command {
	c := newCommand("requeue DELIVERY_ID... | --all", "send quarantined deliveries whose record is readable again back to dispatch:pending", nil, getenv)
	all := c.flags().Bool("all", false, "every entry whose delivery record is readable again")
	dryRun := c.flags().Bool("dry-run", false, "show what would be requeued; change nothing")
	return c.runs(func(ctx context.Context, pos []string, cfg *config.Config) error {
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
	})
}

func status(getenv func(string) string) *cobra.Command {
	c := newCommand("status [--management-urls URL,...]", "queue depth, in flight, scheduled, held, bridges, breakers and limits per replica", cli.NoArgs, getenv)
	c.managementFlag()
	return c.runs(func(ctx context.Context, _ []string, cfg *config.Config) error {
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
	})
}

func eventsEmit(getenv func(string) string) *cobra.Command {
	c := newCommand("emit --tenant T --type TYPE [--data JSON] [--scope S]", "write an event and its deliveries exactly as cycles-server-admin does", cli.NoArgs, getenv)
	var r EmitRequest
	var data string
	c.flags().StringVar(&r.TenantID, "tenant", "", "tenant the event belongs to (required; __system__ for admin-plane events)")
	c.flags().StringVar(&r.EventType, "type", "", "event type, e.g. budget.exhausted (required)")
	c.flags().StringVar(&data, "data", "", `event data, a JSON object, e.g. '{"ledger_id":"led_1","budget_id":"b_1"}'`)
	c.flags().StringVar(&r.Scope, "scope", "", "event scope, matched against subscriptions' scope filters")
	c.flags().StringVar(&r.CorrelationID, "correlation-id", "", "correlation id (indexed under events:correlation:{id})")
	c.flags().StringVar(&r.TraceID, "trace-id", "", "trace id (32 hex) for the event and its deliveries")
	return c.runs(func(ctx context.Context, _ []string, cfg *config.Config) error {
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
			fmt.Fprintln(c.io.Stderr, "warning:", w)
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
	})
}
