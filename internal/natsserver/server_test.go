package natsserver_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/natsserver"
)

func start(t *testing.T, opts natsserver.Options) *natsserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := natsserver.Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

func connectJS(t *testing.T, s *natsserver.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := s.Connect()
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	return nc, js
}

func publishOne(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.Publish(ctx, "s", []byte("hello")); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

func streamMsgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "S")
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Msgs
}

func TestStart_WithoutListenerServesJetStreamInProcess(t *testing.T) {
	s := start(t, natsserver.Options{StoreDir: t.TempDir()})
	defer s.Shutdown()

	if got := s.ClientURL(); got != "" {
		t.Errorf("ClientURL = %q, want empty when not listening", got)
	}
	nc, js := connectJS(t, s)
	defer nc.Close()
	publishOne(t, js)
	if got := streamMsgs(t, js); got != 1 {
		t.Errorf("stream msgs = %d, want 1", got)
	}
}

func TestStart_WithListenerServesTCPOnAFreePort(t *testing.T) {
	s := start(t, natsserver.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	defer s.Shutdown()

	url := s.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":4222") || strings.HasSuffix(url, ":0") {
		t.Fatalf("ClientURL = %q, want a free loopback port", url)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	publishOne(t, js)
}

func TestStart_KeepsMessagesAcrossRestartWithTheSameStoreDir(t *testing.T) {
	dir := t.TempDir()
	s := start(t, natsserver.Options{StoreDir: dir})
	nc, js := connectJS(t, s)
	publishOne(t, js)
	nc.Close()
	s.Shutdown()

	s = start(t, natsserver.Options{StoreDir: dir, SyncAlways: true})
	defer s.Shutdown()
	nc, js = connectJS(t, s)
	defer nc.Close()
	if got := streamMsgs(t, js); got != 1 {
		t.Errorf("stream msgs after restart = %d, want 1", got)
	}
}

func TestStart_RejectsBadOptions(t *testing.T) {
	cases := []struct {
		name string
		opts natsserver.Options
		want string
	}{
		{"missing store dir", natsserver.Options{}, "StoreDir is required"},
		{"listen without port", natsserver.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1"}, "listen address"},
		{"listen with bad port", natsserver.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:http"}, "invalid port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := natsserver.Start(context.Background(), tc.opts)
			if err == nil {
				s.Shutdown()
				t.Fatal("Start succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestStart_RoutesServerLogLinesToSlog(t *testing.T) {
	var buf safeBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := start(t, natsserver.Options{StoreDir: t.TempDir(), ServerName: "logged", Logger: logger})
	s.Shutdown()
	out := buf.String()
	if !strings.Contains(out, "component=nats-server") || !strings.Contains(out, "logged") {
		t.Errorf("log output lacks server lines naming the server:\n%s", out)
	}
}

func TestStart_FailsWhenContextIsAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := natsserver.Start(ctx, natsserver.Options{StoreDir: t.TempDir()})
	if err == nil {
		s.Shutdown()
		t.Fatal("Start succeeded with a cancelled context")
	}
}
