package engine

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// commandLog records the commands a Redis client sends, handshakes aside.
type commandLog struct {
	mu   sync.Mutex
	cmds []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			l.add(c)
		}
		return next(ctx, cmds)
	}
}

func (l *commandLog) add(c redis.Cmder) {
	if n := c.Name(); n == "hello" || n == "client" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cmds = append(l.cmds, c.Name()+" "+c.Args()[1].(string))
}

func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.cmds
	l.cmds = nil
	return out
}

const (
	linkTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	// earlier is the span context a previous handling left behind.
	earlier = "00-" + linkTraceID + "-00f067aa0ba902b7-01"
)

func TestAttemptSpan_LinksToThePreviousHandlingWithOneReadAndOneWriteAndNothingWhenNotRecording(t *testing.T) {
	env := testenv.Redis(t)
	client := redis.NewClient(&redis.Options{Addr: env.Server.Addr()})
	t.Cleanup(func() { client.Close() })
	log := &commandLog{}
	client.AddHook(log)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	key := store.TraceLinkKey("del_1")

	producer := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	promoted := context.WithValue(producer, republished{}, true)
	tests := []struct {
		name         string
		tracer       trace.TracerProvider
		ctx          context.Context // as extractTrace left it
		numDelivered uint64
		attempts     int
		unsampled    bool // admin recorded an unsampled inbound traceparent
		stored       bool // a previous handling left its context
		final        bool
		want         []string
		wantLink     bool
	}{
		{name: "tracing off, a redelivered retry put off again", tracer: noop.NewTracerProvider(), ctx: producer,
			numDelivered: 3, attempts: 2, stored: true},
		{name: "an unsampled trace", tracer: tp, ctx: producer, numDelivered: 3, attempts: 2, unsampled: true, stored: true},
		{name: "first handling of a fresh work item, retry scheduled", tracer: tp, ctx: producer, numDelivered: 1,
			want: []string{"set " + key}},
		{name: "first handling of a fresh work item, delivered", tracer: tp, ctx: producer, numDelivered: 1, final: true},
		{name: "a nak's redelivery, put off again", tracer: tp, ctx: producer, numDelivered: 2, stored: true,
			want: []string{"get " + key, "set " + key}, wantLink: true},
		{name: "a promotion of a never attempted delivery, delivered", tracer: tp, ctx: promoted, numDelivered: 1, stored: true, final: true,
			want: []string{"get " + key, "del " + key}, wantLink: true},
		{name: "a promoted retry, from a bridge that does not trace", tracer: tp, ctx: context.Background(), numDelivered: 1, attempts: 1, stored: true,
			final: true, want: []string{"get " + key, "del " + key}, wantLink: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			env.Client.Del(ctx, key)
			if tt.stored {
				env.Client.Set(ctx, key, earlier, time.Hour)
			}
			exp.Reset()
			e := &Engine{cfg: Config{}.withDefaults(), store: store.New(client), log: slog.New(slog.DiscardHandler),
				tracer: tt.tracer.Tracer(tracerName)}
			md := &jetstream.MsgMetadata{NumDelivered: tt.numDelivered, Consumer: "jetrelay"}
			d := &proto.Delivery{DeliveryID: "del_1", TraceID: linkTraceID, Attempts: tt.attempts, Status: proto.DeliveryPending}
			if tt.attempts > 0 {
				d.Status = proto.DeliveryRetrying
			}
			if tt.unsampled {
				d.TraceFlags, d.TraceparentInboundValid = "00", ptr(true)
				tt.ctx = context.Background()
			}
			handle := func() {
				ctx, span := e.startAttempt(tt.ctx, md, d)
				if tt.final {
					spanEvent(ctx, eventDelivered, "delivered")
				} else {
					spanEvent(ctx, eventRetryScheduled, "http_5xx")
				}
				span.End()
			}
			log.take()
			handle()
			if got := log.take(); !slices.Equal(got, tt.want) {
				t.Errorf("Redis commands = %q, want %q", got, tt.want)
			}
			spans := exp.GetSpans()
			if tt.tracer != tp || tt.unsampled {
				if len(spans) != 0 {
					t.Errorf("%d spans recorded", len(spans))
				}
				return
			}
			if len(spans) != 1 {
				t.Fatalf("%d spans, want the attempt span", len(spans))
			}
			s := spans[0]
			if tt.wantLink {
				if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" ||
					s.Links[0].SpanContext.TraceID().String() != linkTraceID ||
					len(s.Links[0].Attributes) != 1 || s.Links[0].Attributes[0] != linkAttr {
					t.Errorf("links = %+v, want one to the previous handling marked jetrelay.link=previous_attempt", s.Links)
				}
			} else if len(s.Links) != 0 {
				t.Errorf("links = %+v, want none", s.Links)
			}
			v, err := env.Client.Get(ctx, key).Result()
			switch {
			case tt.final && err != redis.Nil:
				t.Errorf("after a final outcome the key holds %q (%v), want it gone", v, err)
			case !tt.final && v != proto.BuildTraceparent(s.SpanContext.TraceID().String(), s.SpanContext.SpanID().String(), "01"):
				t.Errorf("after a put-off the key holds %q, want this span's traceparent", v)
			}
			if !tt.final {
				if ttl := env.Client.TTL(ctx, key).Val(); ttl < 24*time.Hour || ttl > 25*time.Hour {
					t.Errorf("key TTL = %s, want the stale cutoff plus an hour", ttl)
				}
			}
		})
	}
}

func TestAttemptSpan_WithTracingOffAllocatesNoMoreThanTheNoopSpan(t *testing.T) {
	e := &Engine{cfg: Config{}.withDefaults(), log: slog.New(slog.DiscardHandler), tracer: noop.NewTracerProvider().Tracer(tracerName)}
	md := &jetstream.MsgMetadata{NumDelivered: 3, Consumer: "jetrelay"}
	d := &proto.Delivery{DeliveryID: "del_1", TraceID: linkTraceID, Attempts: 2, Status: proto.DeliveryRetrying}
	bare := testing.AllocsPerRun(200, func() {
		_, span := e.tracer.Start(deliveryParent(context.Background(), d), "process "+e.cfg.Queue.Subject, trace.WithSpanKind(trace.SpanKindConsumer))
		span.End()
	})
	handling := testing.AllocsPerRun(200, func() {
		ctx, span := e.startAttempt(context.Background(), md, d)
		spanEvent(ctx, eventRetryScheduled, "http_5xx")
		span.End()
	})
	if handling > bare {
		t.Errorf("a handling's span costs %.0f allocations with tracing off, the no-op span alone %.0f", handling, bare)
	}
}

func ptr[T any](v T) *T { return &v }
