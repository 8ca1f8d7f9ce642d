package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jetrelay/jetrelay/internal/pgproc"
)

// PostgresEnv is a running private PostgreSQL server and a pool connected to
// its "postgres" database.
type PostgresEnv struct {
	Server *pgproc.Server
	// URL connects to the "postgres" database as the superuser.
	URL  string
	Pool *pgxpool.Pool
}

// Postgres starts a private PostgreSQL server for the test (initdb and pg_ctl
// on a temporary folder and a free port) and stops it when the test ends. A
// missing PostgreSQL fails the test with instructions rather than skipping.
func Postgres(t testing.TB) *PostgresEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := pgproc.Start(ctx)
	if errors.Is(err, pgproc.ErrNotInstalled) {
		t.Fatalf("testenv: these tests need a real PostgreSQL: %v", err)
	}
	if err != nil {
		t.Fatalf("testenv: start postgres: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("testenv: stop postgres: %v", err)
		}
	})
	url := srv.URL("")
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("testenv: connect to postgres: %v", err)
	}
	t.Cleanup(pool.Close)
	return &PostgresEnv{Server: srv, URL: url, Pool: pool}
}
