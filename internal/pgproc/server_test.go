package pgproc

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestStart_RunsAPrivateServerThatStopRemoves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.port == 5432 {
		t.Fatalf("private server took the system port 5432")
	}
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatalf("server does not accept connections: %v", err)
	}
	c.Close()
	if err := s.CreateDatabase(ctx, "orders"); err != nil {
		t.Fatalf("create a database: %v", err)
	}
	if err := s.CreateDatabase(ctx, "orders"); err == nil {
		t.Fatalf("creating the same database twice succeeded")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Fatalf("server still accepts connections after Stop")
	}
}
