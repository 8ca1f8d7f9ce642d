package receive_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/pgproc"
	"github.com/jetrelay/jetrelay/internal/redisproc"
	"github.com/jetrelay/jetrelay/transport/receive"
	"github.com/jetrelay/jetrelay/transport/receive/pgstore"
	"github.com/jetrelay/jetrelay/transport/receive/redisstore"
)

// One real Redis and one real PostgreSQL serve every test of the package;
// each test gets its own key prefix and table, so tests stay independent
// without paying a server start each.
var (
	sharedRedis *redis.Client
	sharedPG    *pgxpool.Pool
	storeSeq    atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(runWithServers(m))
}

func runWithServers(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := redisproc.Start(ctx, redisproc.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "these tests need a real Redis:", err)
		return 1
	}
	defer rs.Stop()
	pg, err := pgproc.Start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "these tests need a real PostgreSQL:", err)
		return 1
	}
	defer pg.Stop()
	sharedRedis = redis.NewClient(&redis.Options{Addr: rs.Addr()})
	defer sharedRedis.Close()
	if sharedPG, err = pgxpool.New(ctx, pg.URL("")); err != nil {
		fmt.Fprintln(os.Stderr, "connect to postgres:", err)
		return 1
	}
	defer sharedPG.Close()
	return m.Run()
}

// stores returns a fresh Store in the shared Redis, in the shared
// PostgreSQL and in memory, so every dedupe test runs against each.
func stores(t *testing.T) map[string]receive.Store {
	t.Helper()
	n := storeSeq.Add(1)
	ps, err := pgstore.New(sharedPG, fmt.Sprintf("receive_events_%d", n))
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.EnsureSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ps.EnsureSchema(context.Background()); err != nil {
		t.Fatalf("EnsureSchema is not idempotent: %v", err)
	}
	return map[string]receive.Store{
		"redis":    redisstore.New(sharedRedis, redisstore.WithPrefix(fmt.Sprintf("test%d:", n))),
		"postgres": ps,
		"memory":   receive.NewMemoryStore(0),
	}
}
