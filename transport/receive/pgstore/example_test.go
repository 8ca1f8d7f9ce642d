package pgstore_test

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jetrelay/jetrelay/transport/receive"
	"github.com/jetrelay/jetrelay/transport/receive/pgstore"
)

// Deduplication in PostgreSQL: a unique event id, INSERT … ON CONFLICT DO
// NOTHING. Passing a pgx.Tx instead of the pool records the event id in the
// same commit as the handler's own writes.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal/app")
	if err != nil {
		panic(err)
	}
	store, err := pgstore.New(pool, "")
	if err != nil {
		panic(err)
	}
	if err := store.EnsureSchema(ctx); err != nil {
		panic(err)
	}
	deduper := receive.NewDeduper(store)
	_ = deduper
	// Once a day or so: forget ids older than the sender's retry window.
	_, _ = store.Purge(ctx, receive.DefaultTTL)
}
