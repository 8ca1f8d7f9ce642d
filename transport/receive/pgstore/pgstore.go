// Package pgstore is a receive.Store in a PostgreSQL table. It lives apart
// from package receive so a receiver that only verifies signatures does not
// link pgx.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jetrelay/jetrelay/transport/receive"
)

// DB is what Store needs of a connection: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all have it. Passing a transaction makes the claim part
// of it: the event id is then recorded in the same commit as the handler's
// own writes.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DefaultTable is the table Store keeps event ids in.
const DefaultTable = "receive_events"

// Store is a receive.Store in a PostgreSQL table with a unique event id: a
// claim is INSERT … ON CONFLICT DO NOTHING. Unlike redisstore.Store it keeps
// processed ids until Purge removes them. Safe for concurrent use by many
// processes.
type Store struct {
	db    DB
	table string
}

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// New returns a receive.Store using table (DefaultTable when
// empty) through db. Call EnsureSchema once before use.
func New(db DB, table string) (*Store, error) {
	if table == "" {
		table = DefaultTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("receive: table name %q must be lowercase letters, digits and underscores", table)
	}
	return &Store{db: db, table: table}, nil
}

// EnsureSchema creates the table if it does not exist. It is idempotent.
func (s *Store) EnsureSchema(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
		event_id      text PRIMARY KEY,
		state         text NOT NULL CHECK (state IN ('processing', 'done')),
		token         text,
		claimed_until timestamptz,
		done_at       timestamptz
	)`)
	return err
}

// Claim implements receive.Store: INSERT … ON CONFLICT DO NOTHING claims a new id;
// an existing claim whose lease ended is taken over by an UPDATE that only
// matches an expired claim, so two takers cannot both win.
func (s *Store) Claim(ctx context.Context, eventID, token string, lease time.Duration) (receive.ClaimState, error) {
	for range 3 {
		tag, err := s.db.Exec(ctx, `INSERT INTO `+s.table+` (event_id, state, token, claimed_until)
			VALUES ($1, 'processing', $2, now() + $3 * interval '1 millisecond')
			ON CONFLICT (event_id) DO NOTHING`, eventID, token, lease.Milliseconds())
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() == 1 {
			return receive.Claimed, nil
		}
		tag, err = s.db.Exec(ctx, `UPDATE `+s.table+`
			SET token = $2, claimed_until = now() + $3 * interval '1 millisecond'
			WHERE event_id = $1 AND state = 'processing' AND claimed_until < now()`, eventID, token, lease.Milliseconds())
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() == 1 {
			return receive.Claimed, nil
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
			return receive.Done, nil
		}
		return receive.InProgress, nil
	}
	return receive.InProgress, nil
}

// Complete implements receive.Store.
func (s *Store) Complete(ctx context.Context, eventID, _ string) error {
	_, err := s.db.Exec(ctx, `UPDATE `+s.table+` SET state = 'done', token = NULL, claimed_until = NULL, done_at = now() WHERE event_id = $1`, eventID)
	return err
}

// Release implements receive.Store: the row is deleted if it is still token's claim.
func (s *Store) Release(ctx context.Context, eventID, token string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM `+s.table+` WHERE event_id = $1 AND state = 'processing' AND token = $2`, eventID, token)
	return err
}

// Purge deletes processed ids older than age (e.g. redisstore.DefaultTTL) and
// returns how many it deleted. Run it periodically to bound the table.
func (s *Store) Purge(ctx context.Context, age time.Duration) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM `+s.table+` WHERE state = 'done' AND done_at < now() - $1 * interval '1 millisecond'`, age.Milliseconds())
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}
