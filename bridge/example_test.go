package bridge_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/internal/natsserver"
)

// A bridge wired to an embedded JetStream server, running until SIGTERM.
func ExampleNew() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()

	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: "/var/lib/jetrelay"})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	// A publish timeout frees the async-publish slot of a PubAck that never comes.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()

	b, err := bridge.New(rdb, js, bridge.Config{InstanceID: "bridge-0"})
	if err != nil {
		log.Fatal(err)
	}
	if err := b.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
