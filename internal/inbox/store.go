package inbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound means no inbox event has the given event id.
var ErrNotFound = errors.New("inbox: no such event")

// Event is one inbox row.
type Event struct {
	ID            int64       `json:"id"`
	EventID       string      `json:"event_id"`
	EventType     string      `json:"event_type"`
	Header        http.Header `json:"headers"`
	Body          []byte      `json:"-"`
	Status        Status      `json:"status"`
	AttemptCount  int         `json:"attempt_count"`
	ClaimedBy     string      `json:"claimed_by,omitempty"`
	ClaimedUntil  *time.Time  `json:"claimed_until,omitempty"`
	NextAttemptAt time.Time   `json:"next_attempt_at"`
	ReceivedAt    time.Time   `json:"received_at"`
	ProcessedAt   *time.Time  `json:"processed_at,omitempty"`
	LastError     string      `json:"last_error,omitempty"`
	Replays       int         `json:"replays"`
}

// Store is the inbox table. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore uses pool; run Migrate first.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Insert stores a received event unless its event id is already in the
// inbox; it reports whether the row is new. It returns once the row is
// committed.
func (s *Store) Insert(ctx context.Context, eventID, eventType string, header http.Header, body []byte) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO jetrelay_inbox (event_id, event_type, headers, body)
		VALUES ($1, $2, $3, $4) ON CONFLICT (event_id) DO NOTHING`, eventID, eventType, header, body)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// claim takes up to n due rows for worker for lease: new, failed and due
// for a retry, or processing with an expired lease (a crashed worker's).
// SKIP LOCKED lets concurrent workers take disjoint rows without waiting.
func (s *Store) claim(ctx context.Context, worker string, n int, lease time.Duration) ([]Event, error) {
	rows, err := s.pool.Query(ctx, `UPDATE jetrelay_inbox SET
			status = 'processing', claimed_by = $1,
			claimed_until = now() + $2 * interval '1 millisecond',
			next_attempt_at = now() + $2 * interval '1 millisecond',
			attempt_count = attempt_count + 1
		WHERE id IN (
			SELECT id FROM jetrelay_inbox
			WHERE status IN ('received', 'processing', 'failed') AND next_attempt_at <= now()
			ORDER BY next_attempt_at
			LIMIT $3
			FOR UPDATE SKIP LOCKED)
		RETURNING id, event_id, event_type, headers, body, attempt_count`, worker, lease.Milliseconds(), n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.ID, &e.EventID, &e.EventType, &e.Header, &e.Body, &e.AttemptCount)
		e.Status, e.ClaimedBy = StatusProcessing, worker
		return e, err
	})
}

// done records a forwarded event. The claim (worker and attempt) fences it:
// a worker whose lease was taken over does not overwrite the new claim.
func (s *Store) done(ctx context.Context, e Event) error {
	_, err := s.pool.Exec(ctx, `UPDATE jetrelay_inbox SET status = 'done', processed_at = now(),
			claimed_by = NULL, claimed_until = NULL, last_error = NULL
		WHERE id = $1 AND claimed_by = $2 AND attempt_count = $3 AND status = 'processing'`, e.ID, e.ClaimedBy, e.AttemptCount)
	return err
}

// fail records a failed forward: failed with a retry time, or dead_letter
// once attempt maxAttempts failed.
func (s *Store) fail(ctx context.Context, e Event, cause string, retryIn time.Duration, maxAttempts int) error {
	_, err := s.pool.Exec(ctx, `UPDATE jetrelay_inbox SET
			status = CASE WHEN attempt_count >= $4 THEN 'dead_letter' ELSE 'failed' END,
			next_attempt_at = now() + $5 * interval '1 millisecond',
			claimed_by = NULL, claimed_until = NULL, last_error = $6
		WHERE id = $1 AND claimed_by = $2 AND attempt_count = $3 AND status = 'processing'`,
		e.ID, e.ClaimedBy, e.AttemptCount, maxAttempts, retryIn.Milliseconds(), cause)
	return err
}

const eventColumns = `id, event_id, event_type, headers, body, status, attempt_count, coalesce(claimed_by, ''),
	claimed_until, next_attempt_at, received_at, processed_at, coalesce(last_error, ''), replays`

func scanEvent(r pgx.CollectableRow) (Event, error) {
	var e Event
	var status string
	err := r.Scan(&e.ID, &e.EventID, &e.EventType, &e.Header, &e.Body, &status, &e.AttemptCount, &e.ClaimedBy,
		&e.ClaimedUntil, &e.NextAttemptAt, &e.ReceivedAt, &e.ProcessedAt, &e.LastError, &e.Replays)
	e.Status = Status(status)
	return e, err
}

// Get returns the event with eventID, or ErrNotFound.
func (s *Store) Get(ctx context.Context, eventID string) (Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM jetrelay_inbox WHERE event_id = $1`, eventID)
	if err != nil {
		return Event{}, err
	}
	e, err := pgx.CollectExactlyOneRow(rows, scanEvent)
	if errors.Is(err, pgx.ErrNoRows) {
		return Event{}, fmt.Errorf("%w: %s", ErrNotFound, eventID)
	}
	return e, err
}

// Filter selects events for List.
type Filter struct {
	Status Status // "" means every status
	Limit  int    // 0 means 50
}

// List returns the newest events matching f, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Event, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM jetrelay_inbox
		WHERE $1 = '' OR status = $1 ORDER BY received_at DESC, id DESC LIMIT $2`, string(f.Status), f.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanEvent)
}

// Counts returns how many events are in each status.
func (s *Store) Counts(ctx context.Context) (map[Status]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM jetrelay_inbox GROUP BY status`)
	if err != nil {
		return nil, err
	}
	out := make(map[Status]int64, len(Statuses))
	var st string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error { out[Status(st)] = n; return nil })
	return out, err
}

// Replay makes the given events due again with a fresh attempt count, and
// returns the ids it changed. Only events that failed or were dead-lettered
// change, plus done ones when again is set: an event that is received or
// processing is already on its way, and one that a replay already brought
// to done must not be forwarded once more because the same replay ran
// twice, so replaying twice forwards once. again is for sending an event
// the target already acted on a second time, deliberately.
func (s *Store) Replay(ctx context.Context, eventIDs []string, again bool) ([]string, error) {
	if again {
		return s.replay(ctx, `event_id = ANY($1)`, eventIDs)
	}
	return s.replay(ctx, `event_id = ANY($1) AND status <> 'done'`, eventIDs)
}

// ReplayStatus replays every event in status (done, failed or dead_letter).
func (s *Store) ReplayStatus(ctx context.Context, status Status) ([]string, error) {
	return s.replay(ctx, `status = $1`, string(status))
}

func (s *Store) replay(ctx context.Context, where string, arg any) ([]string, error) {
	rows, err := s.pool.Query(ctx, `UPDATE jetrelay_inbox SET status = 'received', attempt_count = 0,
			next_attempt_at = now(), last_error = NULL, replays = replays + 1
		WHERE `+where+` AND status IN ('done', 'failed', 'dead_letter')
		RETURNING event_id`, arg)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Purge deletes done events forwarded more than age ago and returns how
// many it deleted. Failed and dead-lettered events are kept: they still
// need someone.
func (s *Store) Purge(ctx context.Context, age time.Duration) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM jetrelay_inbox
		WHERE status = 'done' AND processed_at < now() - $1 * interval '1 millisecond'`, age.Milliseconds())
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}
