package inbox_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jetrelay/jetrelay/internal/pgproc"
)

// One private PostgreSQL server serves the package's tests; each test gets
// a database of its own (see database), so they stay independent without
// paying an initdb each.
var (
	sharedPG *pgproc.Server
	dbSeq    atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(runWithPostgres(m))
}

func runWithPostgres(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := pgproc.Start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "these tests need a real PostgreSQL:", err)
		return 1
	}
	defer srv.Stop()
	sharedPG = srv
	return m.Run()
}

// testDB is a fresh database on the shared server.
type testDB struct {
	URL  string
	Pool *pgxpool.Pool
}

// database creates a fresh database for the test and a pool on it.
func database(t testing.TB) *testDB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("inbox_test_%d", dbSeq.Add(1))
	if err := sharedPG.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	url := sharedPG.URL(name)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &testDB{URL: url, Pool: pool}
}
