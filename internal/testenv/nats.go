package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/natsserver"
)

// NATS starts an in-process JetStream server with no TCP listener, its store
// in t.TempDir(), and returns it with a connection and a JetStream context.
// Everything is closed when the test ends. The JetStream context times out
// unanswered async publishes, as production wiring should, so a test never
// hangs on a lost PubAck.
func NATS(t testing.TB) (*natsserver.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("testenv: start nats-server: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatalf("testenv: connect to nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("testenv: jetstream: %v", err)
	}
	return srv, nc, js
}
