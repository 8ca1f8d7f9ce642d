package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Status is the state of one inbox event.
type Status string

// The states of an inbox event. received → processing → done, or
// processing → failed → processing … → dead_letter after MaxAttempts.
const (
	StatusReceived   Status = "received"
	StatusProcessing Status = "processing"
	StatusDone       Status = "done"
	StatusFailed     Status = "failed"
	StatusDeadLetter Status = "dead_letter"
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{StatusReceived, StatusProcessing, StatusDone, StatusFailed, StatusDeadLetter}

// migrations are applied in order, each once, recorded in
// jetrelay_inbox_schema. Append; never edit an applied one.
var migrations = []string{
	// 1: the inbox table. next_attempt_at is when the row is next due: now
	// for a new row, the retry time of a failed one, and claimed_until of a
	// processing one, so one index finds new, retryable and abandoned rows.
	`CREATE TABLE IF NOT EXISTS jetrelay_inbox (
		id              bigserial PRIMARY KEY,
		event_id        text NOT NULL UNIQUE,
		event_type      text NOT NULL DEFAULT '',
		headers         jsonb NOT NULL,
		body            bytea NOT NULL,
		status          text NOT NULL DEFAULT 'received'
		                CHECK (status IN ('received', 'processing', 'done', 'failed', 'dead_letter')),
		attempt_count   integer NOT NULL DEFAULT 0,
		claimed_by      text,
		claimed_until   timestamptz,
		next_attempt_at timestamptz NOT NULL DEFAULT now(),
		received_at     timestamptz NOT NULL DEFAULT now(),
		processed_at    timestamptz,
		last_error      text,
		replays         integer NOT NULL DEFAULT 0
	);
	CREATE INDEX IF NOT EXISTS jetrelay_inbox_due ON jetrelay_inbox (next_attempt_at)
		WHERE status IN ('received', 'processing', 'failed');
	CREATE INDEX IF NOT EXISTS jetrelay_inbox_status ON jetrelay_inbox (status, received_at);`,
}

// migrateLock is the advisory lock key that serialises concurrent
// migrations (several inbox processes starting at once).
const migrateLock = 0x6a6574696e62 // "jetinb"

// Migrate creates or upgrades the inbox schema. It is idempotent and safe to
// run from several processes at once.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
			return fmt.Errorf("inbox: migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS jetrelay_inbox_schema (
			version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("inbox: schema table: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM jetrelay_inbox_schema`).Scan(&current); err != nil {
			return fmt.Errorf("inbox: schema version: %w", err)
		}
		for v := current + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("inbox: migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO jetrelay_inbox_schema (version) VALUES ($1)`, v); err != nil {
				return fmt.Errorf("inbox: record migration %d: %w", v, err)
			}
		}
		return nil
	})
}
