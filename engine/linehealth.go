package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// An ordered line whose consumer cannot be created or pulled (a stream's
// consumer limit, a conflicting consumer of the same name, permissions)
// is retried with backoff, but its subscription gets nothing meanwhile
// while every other check stays green. Once that has lasted
// Config.LineFailingAfter, Ready reports it, naming the subscription, and
// FailingLines lists it for `jetrelay status`.

// DefaultLineFailingAfter is how long an ordered line may fail before
// Ready reports it unless Config.LineFailingAfter says otherwise: longer
// than a stream leader election or a NATS reconnect.
const DefaultLineFailingAfter = 30 * time.Second

// FailingLine is an ordered line this replica cannot pull.
type FailingLine struct {
	SubscriptionID string
	Since          time.Time // first failure of the current run of failures
	Err            string    // the last failure
}

// lineFaults are this replica's lines failing now, by subscription.
type lineFaults struct {
	mu sync.Mutex
	m  map[string]FailingLine
}

// fail records that sub's line failed now with err.
func (f *lineFaults) fail(sub string, err error, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]FailingLine{}
	}
	l, ok := f.m[sub]
	if !ok {
		l = FailingLine{SubscriptionID: sub, Since: now}
	}
	l.Err = err.Error()
	f.m[sub] = l
}

// ok forgets sub's failures: its line is pulled again, or no longer.
func (f *lineFaults) ok(sub string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, sub)
}

// failing returns the lines failing for at least after, by subscription.
func (f *lineFaults) failing(now time.Time, after time.Duration) []FailingLine {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FailingLine
	for _, sub := range slices.Sorted(maps.Keys(f.m)) {
		if l := f.m[sub]; now.Sub(l.Since) >= after {
			out = append(out, l)
		}
	}
	return out
}

// FailingLines returns the ordered lines this replica has been unable to
// pull for at least Config.LineFailingAfter.
func (e *Engine) FailingLines() []FailingLine {
	return e.lineFaults.failing(time.Now(), e.cfg.LineFailingAfter)
}

// linesProblem is Ready's error for the failing lines, nil when none.
func (e *Engine) linesProblem() error {
	failing := e.FailingLines()
	if len(failing) == 0 {
		return nil
	}
	const shown = 3
	parts := make([]string, 0, shown)
	for _, l := range failing[:min(len(failing), shown)] {
		parts = append(parts, fmt.Sprintf("subscription %s for %s: %s", l.SubscriptionID, time.Since(l.Since).Round(time.Second), l.Err))
	}
	msg := strings.Join(parts, "; ")
	if more := len(failing) - shown; more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return fmt.Errorf("ordered lines cannot be pulled (their deliveries wait): %s", msg)
}
