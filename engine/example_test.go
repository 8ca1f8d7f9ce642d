package engine_test

import (
	"context"
	"log"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/transport"
)

// logTransport is a custom transport: it "delivers" by logging the event's
// identity, and always succeeds.
type logTransport struct{ log *slog.Logger }

func (t logTransport) Deliver(_ context.Context, req *transport.Request) (transport.Result, error) {
	start := time.Now()
	t.log.Info("delivered", "event_id", req.EventID, "event_type", req.EventType, "subscription_id", req.SubscriptionID)
	return transport.Result{Outcome: transport.Delivered, Latency: time.Since(start)}, nil
}

// An application embeds jetrelay with public packages only: a bridge that
// moves delivery ids from Redis into JetStream, and an engine that delivers
// them, here through a custom transport for log:// subscriptions next to
// nothing else (a Registry filled by hand; transport.OpenRegistry would open
// every compiled-in driver instead).
func ExampleNew_customTransport() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}

	queue := engine.QueueConfig{Stream: "EMBEDDED_DISPATCH", Subject: "embedded.dispatch"}
	b, err := bridge.New(rdb, js, bridge.Config{Queue: queue, InstanceID: "embedded-0"})
	if err != nil {
		log.Fatal(err)
	}
	reg := transport.NewRegistry()
	reg.Register("log", logTransport{log: slog.Default()})
	e, err := engine.New(rdb, js, reg, engine.Config{Queue: queue, Workers: 8})
	if err != nil {
		log.Fatal(err)
	}

	go func() {
		if err := b.Run(ctx); err != nil {
			log.Print(err)
		}
	}()
	if err := e.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
