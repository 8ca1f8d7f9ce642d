package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/inbox"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader in
// different goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func command(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := execute(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

// execute runs `jetrelay inbox args...` as the binary does.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := cli.NewRoot("jetrelay")
	root.AddCommand(inbox.NewCommand(os.Getenv))
	root.SetArgs(append([]string{"inbox"}, args...))
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

func TestCommand_InspectListReplayAndPurgeAnInboxEvent(t *testing.T) {
	pg := database(t)
	if err := inbox.Migrate(context.Background(), pg.Pool); err != nil {
		t.Fatal(err)
	}
	store := inbox.NewStore(pg.Pool)
	if _, err := store.Insert(context.Background(), "evt_cli", "budget.exhausted", http.Header{}, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Pool.Exec(context.Background(), `UPDATE jetrelay_inbox SET status = 'dead_letter', attempt_count = 10, last_error = 'HTTP 502'`); err != nil {
		t.Fatal(err)
	}
	url := "--postgres-url=" + pg.URL

	out, err := command(t, "inspect", "evt_cli", url)
	if err != nil {
		t.Fatal(err, out)
	}
	for _, want := range []string{"status         dead_letter", "attempt_count  10 of 10", "last_error     HTTP 502", "next_action    none until replayed: jetrelay inbox replay evt_cli"} {
		if !strings.Contains(out, want) {
			t.Fatalf("inspect lacks %q:\n%s", want, out)
		}
	}
	out, err = command(t, "list", url, "--status", "dead_letter", "--json")
	var listed []inbox.Event
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].EventID != "evt_cli" {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if out, err = command(t, "replay", url, "--status", "dead_letter"); err != nil || !strings.Contains(out, "replayed 1 event(s)") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	if out, err = command(t, "replay", url, "evt_cli"); err != nil || !strings.Contains(out, "replayed 0 event(s)") {
		t.Fatalf("second replay of an event already due changed it again: %v\n%s", err, out)
	}
	e, _ := store.Get(context.Background(), "evt_cli")
	if e.Status != inbox.StatusReceived || e.AttemptCount != 0 || e.Replays != 1 {
		t.Fatalf("after replay: status %s, attempts %d, replays %d; want received, 0, 1", e.Status, e.AttemptCount, e.Replays)
	}
	if _, err := command(t, "list", url, "--status", "lost"); err == nil {
		t.Fatalf("list accepted an unknown status")
	}

	// Purge keeps what is not done, and done events younger than the age.
	if _, err := pg.Pool.Exec(context.Background(), `UPDATE jetrelay_inbox SET status = 'done', processed_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Insert(context.Background(), "evt_waiting", "budget.exhausted", http.Header{}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if out, err = command(t, "purge", url, "--older-than", "3h"); err != nil || !strings.Contains(out, "purged 0 done event(s)") {
		t.Fatalf("purge of younger events: %v\n%s", err, out)
	}
	if out, err = command(t, "purge", url, "--older-than", "1h"); err != nil || !strings.Contains(out, "purged 1 done event(s)") {
		t.Fatalf("purge: %v\n%s", err, out)
	}
	if _, err := store.Get(context.Background(), "evt_waiting"); err != nil {
		t.Fatalf("purge removed an event that was not done: %v", err)
	}
}

func TestCommand_ServeNeverWritesTheSigningSecret(t *testing.T) {
	pg := database(t)
	const secretValue = "whsec_must_not_leak_7f3a"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv(inbox.EnvSecret, "whsec_other,"+secretValue)
	ctx, cancel := context.WithCancel(context.Background())
	var logs lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- execute(ctx, []string{"serve", "--listen", addr, "--postgres-url", pg.URL, "--forward", "http://127.0.0.1:1/"}, &logs, &logs)
	}()
	await(t, "the intake listens", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if code := post(t, addr, "whsec_forged", "evt_forged", `{}`); code != http.StatusUnauthorized {
		t.Fatalf("forged delivery answered %d, want 401", code)
	}
	if code := post(t, addr, secretValue, "evt_ok", `{}`); code != http.StatusAccepted {
		t.Fatalf("delivery signed with the second env secret answered %d, want 202", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	help, _ := command(t, "serve", "--help")
	if all := logs.String() + help; strings.Contains(all, secretValue) {
		t.Fatalf("the signing secret appears in the output:\n%s", all)
	}
}
