package bench

import (
	"context"
	"io"
	"testing"
	"time"
)

// The ordering scenario measures the fast case beside ordered lines that
// hold work. When admin's writes go slower than the lines drain (the
// race detector and a busy machine make them), the set-up must still
// leave every line with its backlog, not give up after a minute because
// it never saw the lines busy at once (fresh-clone suite, session 20).
// The backlog is emitted one event at a time, each once the lines have
// drained the one before (as long as the receiver answers at all).
func TestBusyLines_EveryLineHoldsItsBacklogWhenTheReceiverDrainsFasterThanAdminWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server, an embedded JetStream and jetrelay")
	}
	ctx := t.Context()
	b := &benchContext{progress: io.Discard, verbose: io.Discard, getenv: func(string) string { return "" }}
	env, err := startBenchEnv(ctx, b, envOptions{encrypt: true, held: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	if err := env.start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := awaitReady(ctx, env); err != nil {
		t.Fatal(err)
	}
	const lines, backlog = 3, 40
	l := &busyLines{o: &orderingOptions{lines: lines, lineBacklog: backlog, lineDelay: time.Millisecond}}
	l.paceBacklog = func(ctx context.Context) error {
		return await(ctx, func() (bool, error) {
			held := l.sink.held.Load() != nil
			n, err := busyCount(ctx, env)
			return held || n == 0, err
		})
	}
	if err := l.start(ctx, env); err != nil {
		t.Fatalf("the busy lines' set-up failed: %v", err)
	}
	if l.seen.lines != lines || l.sent < lines {
		t.Errorf("set-up reports %d lines and %d sends; want %d lines and at least one send each", l.seen.lines, l.sent, lines)
	}
	// Every line gets its whole backlog: nothing held is lost.
	if err := await(ctx, func() (bool, error) {
		per := map[string]int{}
		for _, r := range l.sink.receipts() {
			per[r.path]++
		}
		for _, n := range per {
			if n < backlog {
				return false, nil
			}
		}
		return len(per) == lines, nil
	}); err != nil {
		t.Errorf("the lines' backlog did not all arrive: %v", err)
	}
}
