package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/app"
	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/redisproc"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// demoSub is one subscription of the demo and the receiver endpoint behind it.
type demoSub struct {
	name, path, story string
	behaviour         receiver.Behaviour
	dead              bool // URL points at a closed port: connection refused
	id                string
	endpoint          *receiver.Endpoint
	deliveries        []string
}

// options are the demo's flags.
type options struct {
	events   int
	redisURL string
	timeout  time.Duration
	verbose  bool
}

// NewCommand is `jetrelay demo`: everything on loopback, nothing left
// behind. version labels the stack it starts; getenv is the environment.
func NewCommand(version string, getenv func(string) string) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "self-contained demo: embedded NATS, throwaway redis-server, receiver, live progress",
		Args:  cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr(), version, getenv)
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&o.events, "events", 20, "events to emit")
	fs.StringVar(&o.redisURL, "redis-url", "", "use this Redis instead of starting a throwaway redis-server (it WILL be written to)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "show jetrelay's own logs")
	return cmd
}

func run(ctx context.Context, o options, stdout, stderr io.Writer, version string, getenv func(string) string) error {
	if o.events < 1 || o.events > 100000 {
		return fmt.Errorf("--events must be 1..100000")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	out := &printer{w: stdout}

	// 1. Redis: a throwaway server unless the user pointed us at one.
	if o.redisURL == "" {
		srv, err := redisproc.Start(ctx, redisproc.Options{})
		if err != nil {
			if errors.Is(err, redisproc.ErrNotInstalled) {
				return fmt.Errorf("the demo needs redis-server: %w", err)
			}
			return err
		}
		defer srv.Stop()
		o.redisURL = srv.URL()
		out.f("● started a throwaway redis-server on %s (removed on exit)\n", srv.Addr())
	} else {
		out.f("● using Redis at %s\n", o.redisURL)
	}

	// 2. A receiver with one endpoint per story.
	subs := []*demoSub{
		{name: "healthy", path: "/healthy", story: "answers 200 at once", behaviour: receiver.Healthy()},
		{name: "flaky", path: "/flaky", story: "down for its first 6 requests (503), then recovers", behaviour: receiver.DownThenUp(6)},
		{name: "dead", path: "/dead", story: "refuses connections; max_retries 0, disable_after_failures 3", dead: true},
	}
	recv := receiver.New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	httpSrv := &http.Server{ReadHeaderTimeout: 5 * time.Second}
	defer httpSrv.Close()
	deadAddr, err := receiver.ClosedAddr()
	if err != nil {
		return err
	}
	out.f("● receiver listening on http://%s (verifies X-Cycles-Signature, dedupes by X-Cycles-Event-Id)\n", ln.Addr())

	// 3. jetrelay itself, on an embedded JetStream in a temporary directory.
	dataDir, err := os.MkdirTemp("", "jetrelay-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dataDir)
	out.f("● SSRF guard: loopback (127.0.0.0/8) over plain http allowed through the operator allow-list, for this demo only\n")
	cfg, err := config.Load("demo", nil, func(k string) string {
		switch k {
		case "REDIS_URL":
			return o.redisURL
		// The receiver is on 127.0.0.1 over http, which the SSRF guard's
		// defaults refuse. The operator allow-list opens exactly that,
		// without writing a policy into a Redis the user may have named.
		case "JETRELAY_SSRF_ALLOW_CIDRS":
			return "127.0.0.0/8"
		case "JETRELAY_SSRF_ALLOW_HTTP":
			return "true"
		case "JETRELAY_DATA_DIR":
			return dataDir
		case "JETRELAY_BRIDGE_ID":
			return "demo"
		case "JETRELAY_WORKERS":
			return "16"
		case "JETRELAY_HTTP_REQUEST_TIMEOUT":
			return "5s"
		case "JETRELAY_BREAKER_OPEN": // short, so the tour shows recovery in seconds
			return "1s"
		case "JETRELAY_BREAKER_MAX_OPEN":
			return "2s"

		}
		return ""
	}, stderr)
	if err != nil {
		return err
	}
	logw := io.Discard
	if o.verbose {
		logw = stderr
	}
	log := app.NewLogger("text", getenv("JETRELAY_DEMO_LOG_LEVEL"), logw)
	s, err := app.New(ctx, cfg, log, version)
	if err != nil {
		return err
	}
	defer s.Close()
	// The receiver continues each delivery's trace as a real one would with
	// otelhttp, so `demo:traced` shows its span as the child of the send.
	httpSrv.Handler = otelhttp.NewHandler(recv, "receive webhook",
		otelhttp.WithTracerProvider(s.TracerProvider()), otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(op string, r *http.Request) string { return op + " " + r.URL.Path }))
	go func() { _ = httpSrv.Serve(ln) }()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runDone := make(chan error, 1)
	go func() { runDone <- s.Run(runCtx) }()
	out.f("● jetrelay running: embedded JetStream (no TCP listener), bridge + engine with %d workers\n\n", cfg.Workers)

	// 4. Subscriptions and events, written exactly as cycles-server-admin writes them.
	w := admin.NewWriter(s.Redis(), nil)
	fast := fastPolicy()
	tenant := "demo-tenant"
	for _, d := range subs {
		url := "http://" + ln.Addr().String() + d.path
		if d.dead {
			url = "http://" + deadAddr + d.path
		}
		sub := admin.Subscription{
			TenantID: tenant, Name: "demo " + d.name, URL: url,
			EventTypes: []string{"budget.exhausted"}, RetryPolicy: &fast, DisableAfterFailures: deadDisableAfter,
		}
		if d.dead {
			// No retries: each delivery fails at its first error, so the
			// tour reaches auto-disable in seconds.
			sub.RetryPolicy = &proto.RetryPolicy{MaxRetries: new(int)}
		}
		id, secret, err := w.CreateSubscription(ctx, sub)
		if err != nil {
			return err
		}
		d.id = id
		d.endpoint = recv.Handle(d.path, secret, d.behaviour)
		if d.dead {
			d.endpoint = nil
		}
		out.f("  subscription %-7s %s  %s\n", d.name, id, d.story)
	}
	out.f("\n● emitting %d budget.exhausted events (SAVE_EVENT_LUA + SAVE_AND_ENQUEUE_ONCE_LUA → dispatch:pending)\n", o.events)
	bySub := make(map[string]*demoSub, len(subs))
	for _, d := range subs {
		bySub[d.id] = d
	}
	var all []string
	for i := range o.events {
		ev := admin.Event{
			EventType: "budget.exhausted", TenantID: tenant, Scope: "tenant:" + tenant + "/workspace:demo",
			Actor: &proto.Actor{Type: "api_key", KeyID: "key_demo"}, Source: "cycles-server",
			Data:    json.RawMessage(fmt.Sprintf(`{"ledger_id":"led_demo","unit":"TOKENS","allocated":10000,"remaining":0,"spent":%d}`, 10000+i)),
			TraceID: proto.NewTraceID(),
		}
		_, ids, err := w.Emit(ctx, ev, admin.TraceSnapshot{})
		if err != nil {
			return err
		}
		all = append(all, ids...)
	}
	st := store.New(s.Redis())
	for _, id := range all {
		rec, err := st.Delivery(ctx, id)
		if err != nil {
			return err
		}
		if d := bySub[rec.SubscriptionID]; d != nil {
			d.deliveries = append(d.deliveries, id)
		}
	}
	out.f("  %d deliveries queued\n\n", len(all))

	// 5. Live progress until every delivery is settled: final, or held
	// (parked) because its subscription was disabled.
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var lastLine string
	for {
		p, err := progressOf(ctx, s.Redis(), all)
		if err == nil {
			line := fmt.Sprintf("  pending %-4d retrying %-4d success %-4d failed %-4d held %-4d",
				p.counts[proto.DeliveryPending], p.counts[proto.DeliveryRetrying], p.counts[proto.DeliverySuccess], p.counts[proto.DeliveryFailed], p.held)
			switch {
			case isTerminal(stdout):
				out.f("\r%s", line) // redraw in place
			case line != lastLine:
				out.f("%s\n", line) // a log or pipe gets one line per change
			}
			lastLine = line
			if p.counts[proto.DeliverySuccess]+p.counts[proto.DeliveryFailed]+p.held == len(all) {
				break
			}
		}
		select {
		case <-ctx.Done():
			out.f("\n")
			return fmt.Errorf("demo did not finish in time (%s): %v", o.timeout, ctx.Err())
		case <-tick.C:
		}
	}
	out.f("\n\n")
	stopRun()
	if err := <-runDone; err != nil {
		log.Warn("shutdown", "err", err)
	}
	return summary(ctx, out, s.Redis(), st, subs)
}

// deadDisableAfter is every demo subscription's disable_after_failures: low,
// so the dead one is disabled within the tour.
const deadDisableAfter = 3

// summary prints what each subscription's deliveries ended as.
func summary(ctx context.Context, out *printer, rdb *redis.Client, st *store.Store, subs []*demoSub) error {
	tw := tabwriter.NewWriter(out.w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBSCRIPTION\tDELIVERIES\tSUCCESS\tFAILED\tHELD\tSENDS\tRECEIVER (unique / duplicates / bad signatures)\tSTATUS")
	inactive := map[string]bool{}
	deadFailed := 0
	for _, d := range subs {
		var ok, failed, held, sends int
		var lastErr string
		for _, id := range d.deliveries {
			rec, err := st.Delivery(ctx, id)
			if err != nil {
				return err
			}
			switch rec.Status {
			case proto.DeliverySuccess:
				ok++
			case proto.DeliveryFailed:
				failed++
				if rec.ErrorMessage != nil {
					lastErr = *rec.ErrorMessage
				}
			default:
				if heldBack(ctx, rdb, rec.Delivery, inactive) {
					held++
				}
			}
			sends += rec.Attempts
		}
		recv := "connection refused"
		if d.endpoint != nil {
			rs := d.endpoint.Stats()
			recv = fmt.Sprintf("%d / %d / %d", rs.Unique, rs.Duplicates, rs.BadSig)
		}
		status := "?"
		if raw, err := rdb.Get(ctx, store.SubscriptionKey(d.id)).Bytes(); err == nil {
			if sub, err := proto.ParseSubscription(raw); err == nil {
				status = fmt.Sprintf("%s (consecutive_failures=%d)", sub.Status, sub.ConsecutiveFailures)
			}
		}
		if d.dead {
			deadFailed = failed
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", d.name, len(d.deliveries), ok, failed, held, sends, recv, status)
		if lastErr != "" {
			defer out.f("  %s: last error_message %q\n", d.name, lastErr)
		}
	}
	tw.Flush()
	out.f("\nEvery send was signed (HMAC-SHA256 over the stored event bytes) and carried X-Cycles-Event-Id,\n" +
		"X-Cycles-Trace-Id and traceparent. The flaky endpoint's failures opened its circuit breaker: its\n" +
		"deliveries waited, without using up attempts, until a probe found it back, then all went out.\n" +
		"The dead one's third failed delivery auto-disabled it (disable_after_failures 3; a webhook.disabled\n" +
		"event was saved).")
	if extra := deadFailed - deadDisableAfter; extra > 0 {
		out.f(" The other %d FAILED were sends already in flight when it was disabled: each failed on\n"+
			"its own answer, but none counted past the threshold (consecutive_failures stays %d).", extra, deadDisableAfter)
	}
	out.f("\nIts remaining deliveries are HELD, unsent, in JetStream: re-enable the subscription (status\n" +
		"ACTIVE) and they go out; otherwise they fail once older than MAX_DELIVERY_AGE_MS.\n")
	return nil
}

// progress is where the demo's deliveries stand.
type progress struct {
	counts map[proto.DeliveryStatus]int
	held   int // not final, held in JetStream while their subscription is inactive
}

func progressOf(ctx context.Context, rdb *redis.Client, ids []string) (progress, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = store.DeliveryKey(id)
	}
	vals, err := rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return progress{}, err
	}
	p := progress{counts: make(map[proto.DeliveryStatus]int)}
	inactive := map[string]bool{}
	for _, v := range vals {
		s, _ := v.(string)
		d, err := proto.ParseDelivery([]byte(s))
		if err != nil {
			continue
		}
		if !d.Status.Terminal() && heldBack(ctx, rdb, d, inactive) {
			p.held++
			continue
		}
		p.counts[d.Status]++
	}
	return p, nil
}

// heldBack reports whether a delivery is held for its inactive subscription
// to be re-enabled, as its record says (jetrelay_waiting).
func heldBack(ctx context.Context, rdb *redis.Client, d *proto.Delivery, inactive map[string]bool) bool {
	sub := d.SubscriptionID
	off, seen := inactive[sub]
	if !seen {
		if raw, err := rdb.Get(ctx, store.SubscriptionKey(sub)).Bytes(); err == nil {
			if s, err := proto.ParseSubscription(raw); err == nil {
				off = s.Status != proto.SubscriptionActive
			}
		}
		inactive[sub] = off
	}
	return off && d.Waiting != nil && strings.HasPrefix(*d.Waiting, "subscription_")
}

// fastPolicy keeps the demo short: 4 sends, 1 s apart doubling (7 s in
// all). The flaky endpoint's outage must fit in that schedule plus one open
// period of its breaker, or the breaker fails its deliveries at the end of
// the schedule, as the reference service would.
func fastPolicy() proto.RetryPolicy {
	retries, initial, mult, maxDelay := 3, int64(1000), 2.0, int64(4000)
	return proto.RetryPolicy{MaxRetries: &retries, InitialDelayMs: &initial, BackoffMultiplier: &mult, MaxDelayMs: &maxDelay}
}

// isTerminal reports whether w is a character device (an interactive terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

type printer struct{ w io.Writer }

func (p *printer) f(format string, args ...any) { fmt.Fprintf(p.w, format, args...) }
