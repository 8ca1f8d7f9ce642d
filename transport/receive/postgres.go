package receive

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PostgresDB is what PostgresStore needs of a connection: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all have it. Passing a transaction makes the claim part
// of it: the event id is then recorded in the same commit as the handler's
// own writes.
type PostgresDB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DefaultPostgresTable is the table PostgresStore keeps event ids in.
const DefaultPostgresTable = "receive_events"

// PostgresStore is a Store in a PostgreSQL table with a unique event id: a
// claim is INSERT … ON CONFLICT DO NOTHING. Unlike RedisStore it keeps
// processed ids until Purge removes them. Safe for concurrent use by many
// processes.
type PostgresStore struct {
	db    PostgresDB
	table string
}

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// NewPostgresStore returns a Store using table (DefaultPostgresTable when
// empty) through db. Call EnsureSchema once before use.
func NewPostgresStore(db PostgresDB, table string) (*PostgresStore, error) {
	if table == "" {
		table = DefaultPostgresTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("receive: table name %q must be lowercase letters, digits and underscores", table)
	}
	return &PostgresStore{db: db, table: table}, nil
}

// EnsureSchema creates the table if it does not exist. It is idempotent.
func (s *PostgresStore) EnsureSchema(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
		event_id      text PRIMARY KEY,
		state         text NOT NULL CHECK (state IN ('processing', 'done')),
		token         text,
		claimed_until timestamptz,
		done_at       timestamptz
	)`)
	return err
}

// Claim implements Store: INSERT … ON CONFLICT DO NOTHING claims a new id;
// an existing claim whose lease ended is taken over by an UPDATE that only
// matches an expired claim, so two takers cannot both win.
func (s *PostgresStore) Claim(ctx context.Context, eventID, token string, lease time.Duration) (ClaimState, error) {
	for range 3 {
		tag, err := s.db.Exec(ctx, `INSERT INTO `+s.table+` (event_id, state, token, claimed_until)
			VALUES ($1, 'processing', $2, now() + $3 * interval '1 millisecond')
			ON CONFLICT (event_id) DO NOTHING`, eventID, token, lease.Milliseconds())
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() == 1 {
			return Claimed, nil
		}
		tag, err = s.db.Exec(ctx, `UPDATE `+s.table+`
			SET token = $2, claimed_until = now() + $3 * interval '1 millisecond'
			WHERE event_id = $1 AND state = 'processing' AND claimed_until < now()`, eventID, token, lease.Milliseconds())
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() == 1 {
			return Claimed, nil
		}
		var state string
		err = s.db.QueryRow(ctx, `SELECT state FROM `+s.table+` WHERE event_id = $1`, eventID).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // released between the statements: try again
		}
		if err != nil {
			return 0, err
		}
		if state == "done" {
			return Done, nil
		}
		return InProgress, nil
	}
	return InProgress, nil
}

// Complete implements Store.
func (s *PostgresStore) Complete(ctx context.Context, eventID, _ string) error {
	_, err := s.db.Exec(ctx, `UPDATE `+s.table+` SET state = 'done', token = NULL, claimed_until = NULL, done_at = now() WHERE event_id = $1`, eventID)
	return err
}

// Release implements Store: the row is deleted if it is still token's claim.
func (s *PostgresStore) Release(ctx context.Context, eventID, token string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM `+s.table+` WHERE event_id = $1 AND state = 'processing' AND token = $2`, eventID, token)
	return err
}

// Purge deletes processed ids older than age (e.g. DefaultRedisTTL) and
// returns how many it deleted. Run it periodically to bound the table.
func (s *PostgresStore) Purge(ctx context.Context, age time.Duration) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM `+s.table+` WHERE state = 'done' AND done_at < now() - $1 * interval '1 millisecond'`, age.Milliseconds())
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}
