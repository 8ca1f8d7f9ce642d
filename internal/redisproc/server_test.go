package redisproc

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Start(ctx, opts)
	if errors.Is(err, ErrNotInstalled) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

func client(t *testing.T, rawURL string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", rawURL, err)
	}
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestStart_ServesOnLoopbackAndStopRemovesItsTempDir(t *testing.T) {
	s := startServer(t, Options{})
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || s.Addr() == "127.0.0.1:6379" {
		t.Fatalf("Addr = %q, want a free loopback port", s.Addr())
	}
	if s.URL() != "redis://"+s.Addr() {
		t.Fatalf("URL = %q", s.URL())
	}
	ctx := context.Background()
	c := client(t, s.URL())
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got := c.ConfigGet(ctx, "save").Val()["save"]; got != "" {
		t.Errorf("save = %q, want snapshots off", got)
	}

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s still exists after Stop (stat err %v)", s.dir, err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Error("PING succeeded after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestStart_WithPasswordRejectsAnonymousClients(t *testing.T) {
	s := startServer(t, Options{Password: "p@ss word"})
	ctx := context.Background()
	anon := client(t, "redis://"+s.Addr())
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("anonymous PING error = %v, want NOAUTH", err)
	}
	if err := client(t, s.URL()).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with URL credentials: %v", err)
	}
}

func TestKill_AppendOnlyDataSurvivesRestartOnSamePort(t *testing.T) {
	s := startServer(t, Options{AppendOnly: true})
	ctx := context.Background()
	c := client(t, s.URL())
	if err := c.Set(ctx, "survivor", "yes", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	addr := s.Addr()
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded after Kill")
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Restart(rctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Addr() != addr {
		t.Fatalf("Addr after restart = %s, want %s", s.Addr(), addr)
	}
	if got, err := c.Get(ctx, "survivor").Result(); err != nil || got != "yes" {
		t.Fatalf("GET after restart = %q, %v; want the value written before the crash", got, err)
	}
}

func TestRestart_ShutsDownARunningServerFirst(t *testing.T) {
	s := startServer(t, Options{AppendOnly: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := client(t, s.URL())
	c.Set(ctx, "k", "v", 0)
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if got := c.Get(ctx, "k").Val(); got != "v" {
		t.Fatalf("GET after graceful restart = %q, want v", got)
	}
}

func TestStart_MissingBinaryExplainsHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), Options{})
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("err = %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "apt-get install redis-server") {
		t.Errorf("error %q does not say how to install", err)
	}
}

func TestStart_TakenFixedPortFailsWithRedisLog(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Start(ctx, Options{Port: l.Addr().(*net.TCPAddr).Port, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("err = %v, want a failure quoting redis-server's bind error", err)
	}
	if _, statErr := os.Stat(dir); statErr != nil {
		t.Errorf("caller's Dir was removed: %v", statErr)
	}
}

func TestStart_FsyncAlwaysSyncsEveryWriteAndRecoversAfterKill(t *testing.T) {
	s := startServer(t, Options{Dir: t.TempDir(), AppendOnly: true, FsyncAlways: true})
	ctx := context.Background()
	c := client(t, s.URL())
	if got := c.ConfigGet(ctx, "appendfsync").Val()["appendfsync"]; got != "always" {
		t.Fatalf("appendfsync = %q, want always", got)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Restart(rctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("after SIGKILL and restart GET k = %q, %v; want the acknowledged write", got, err)
	}
}
