package inbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/inbox"
	"github.com/jetrelay/jetrelay/proto"
)

const secret = "whsec_inbox"

// target is a forward destination that records what it got and answers
// status (200 when 0).
type target struct {
	mu     sync.Mutex
	status int
	got    map[string][]http.Header
	bodies map[string][]byte
}

func newTarget(t *testing.T) (*target, string) {
	tg := &target{got: map[string][]http.Header{}, bodies: map[string][]byte{}}
	srv := httptest.NewServer(tg)
	t.Cleanup(srv.Close)
	return tg, srv.URL
}

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	tg.mu.Lock()
	defer tg.mu.Unlock()
	id := r.Header.Get(proto.HeaderEventID)
	tg.got[id] = append(tg.got[id], r.Header.Clone())
	tg.bodies[id] = body
	if tg.status != 0 {
		w.WriteHeader(tg.status)
	}
}

func (tg *target) setStatus(s int) { tg.mu.Lock(); tg.status = s; tg.mu.Unlock() }

func (tg *target) count(id string) int { tg.mu.Lock(); defer tg.mu.Unlock(); return len(tg.got[id]) }

// startInbox runs an inbox server until the test ends.
func startInbox(t testing.TB, cfg inbox.Config) *inbox.Server {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := inbox.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("inbox run: %v", err)
		}
	})
	return s
}

func post(t *testing.T, addr, sec, eventID, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(body))
	req.Header.Set(proto.HeaderEventID, eventID)
	req.Header.Set(proto.HeaderEventType, "tenant.created")
	req.Header.Set(proto.HeaderTraceID, "0af7651916cd43dd8448eb211c80319c")
	req.Header["traceparent"] = []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	req.Header.Set(proto.HeaderSignature, proto.Sign(sec, []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// freeAddr is a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func status(t *testing.T, s *inbox.Server, id string) inbox.Status {
	t.Helper()
	e, err := s.Store().Get(context.Background(), id)
	if err != nil {
		return ""
	}
	return e.Status
}

func TestInbox_ForwardsTheOriginalBodyAndIdentityOnceAndAnswersADuplicate200(t *testing.T) {
	pg := database(t)
	tg, url := newTarget(t)
	s := startInbox(t, inbox.Config{Listen: "127.0.0.1:0", PostgresURL: pg.URL, Forward: url, Secrets: []string{"whsec_old", secret}})
	body := `{"event_id":"evt-1","data":{"amount":1.50}}`
	if code := post(t, s.Addr(), secret, "evt-1", body); code != http.StatusAccepted {
		t.Fatalf("first delivery answered %d, want 202", code)
	}
	if code := post(t, s.Addr(), "whsec_old", "evt-1", body); code != http.StatusOK {
		t.Fatalf("duplicate (signed with the rotation's old secret) answered %d, want 200", code)
	}
	await(t, "the event is done", func() bool { return status(t, s, "evt-1") == inbox.StatusDone })
	if n := tg.count("evt-1"); n != 1 {
		t.Fatalf("target got evt-1 %d times, want 1", n)
	}
	tg.mu.Lock()
	h, got := tg.got["evt-1"][0], tg.bodies["evt-1"]
	tg.mu.Unlock()
	if !bytes.Equal(got, []byte(body)) {
		t.Fatalf("forwarded body %q, want the original bytes %q", got, body)
	}
	if h.Get(proto.HeaderEventType) != "tenant.created" || h.Get(proto.HeaderTraceID) == "" || h.Get("traceparent") == "" ||
		h.Get(proto.HeaderSignature) != proto.Sign(secret, []byte(body)) {
		t.Fatalf("forward lost identity headers: %v", h)
	}
}

func TestInbox_RefusesABadSignatureAndStoresNothing(t *testing.T) {
	pg := database(t)
	_, url := newTarget(t)
	s := startInbox(t, inbox.Config{Listen: "127.0.0.1:0", PostgresURL: pg.URL, Forward: url, Secrets: []string{secret}})
	if code := post(t, s.Addr(), "whsec_forged", "evt-bad", `{}`); code != http.StatusUnauthorized {
		t.Fatalf("forged delivery answered %d, want 401", code)
	}
	var n int
	if err := pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM jetrelay_inbox`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("inbox holds %d rows after a forged delivery (err %v), want 0", n, err)
	}
}

func TestInbox_DeadLettersAfterMaxAttemptsAndReplayForwardsItOnce(t *testing.T) {
	pg := database(t)
	tg, url := newTarget(t)
	tg.setStatus(http.StatusBadGateway)
	s := startInbox(t, inbox.Config{Listen: "127.0.0.1:0", PostgresURL: pg.URL, Forward: url, Secrets: []string{secret},
		MaxAttempts: 3, Backoff: func(int) time.Duration { return 10 * time.Millisecond }, PollInterval: 20 * time.Millisecond})
	post(t, s.Addr(), secret, "evt-dl", `{"n":1}`)
	await(t, "the event is dead-lettered", func() bool { return status(t, s, "evt-dl") == inbox.StatusDeadLetter })
	e, _ := s.Store().Get(context.Background(), "evt-dl")
	if e.AttemptCount != 3 || e.LastError != "HTTP 502" || tg.count("evt-dl") != 3 {
		t.Fatalf("dead letter after %d attempts (target saw %d), last error %q; want 3, 3, HTTP 502", e.AttemptCount, tg.count("evt-dl"), e.LastError)
	}
	var buf bytes.Buffer
	if err := inbox.WriteInspect(&buf, e, 3, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"status         dead_letter", "attempt_count  3 of 3", "dedupe_key     evt-dl", "last_error     HTTP 502", "next_action    none until replayed"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("inspect output lacks %q:\n%s", want, buf.String())
		}
	}

	mgmtAddr := freeAddr(t)
	// A second, intake-only replica with a management address: the status
	// gauge reports the whole inbox, not one process's share.
	startInbox(t, inbox.Config{PostgresURL: pg.URL, Workers: -1, Listen: "127.0.0.1:0", Secrets: []string{secret}, Management: mgmtAddr})
	var scrape string
	await(t, "/metrics answers", func() bool {
		resp, err := http.Get("http://" + mgmtAddr + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		scrape = string(b)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(scrape, `jetrelay_inbox_events{status="dead_letter"} 1`) {
		t.Fatalf("/metrics does not count the dead letter:\n%s", scrape)
	}

	tg.setStatus(0)
	for range 2 { // replay is idempotent: the second changes nothing
		if _, err := s.Store().Replay(context.Background(), []string{"evt-dl"}, false); err != nil {
			t.Fatal(err)
		}
	}
	await(t, "the replayed event is done", func() bool { return status(t, s, "evt-dl") == inbox.StatusDone })
	if n := tg.count("evt-dl"); n != 4 {
		t.Fatalf("target saw evt-dl %d times after a double replay, want 3 failures + 1", n)
	}
	// Replaying a done event again is a deliberate choice.
	if got, err := s.Store().Replay(context.Background(), []string{"evt-dl"}, false); err != nil || len(got) != 0 {
		t.Fatalf("replay of a done event without again = %v, %v; want nothing replayed", got, err)
	}
	if got, err := s.Store().Replay(context.Background(), []string{"evt-dl"}, true); err != nil || len(got) != 1 {
		t.Fatalf("replay of a done event with again = %v, %v; want it replayed", got, err)
	}
	await(t, "the event replayed again reaches the target", func() bool { return tg.count("evt-dl") == 5 })
}

func TestInbox_TakesOverTheEventsOfAWorkerWhoseLeaseExpired(t *testing.T) {
	pg := database(t)
	tg, url := newTarget(t)
	intake := startInbox(t, inbox.Config{Listen: "127.0.0.1:0", PostgresURL: pg.URL, Secrets: []string{secret}, Workers: -1})
	for i := range 5 {
		post(t, intake.Addr(), secret, fmt.Sprintf("evt-lease-%d", i), `{}`)
	}
	// A worker that claimed everything and crashed: its lease runs out.
	if _, err := pg.Pool.Exec(context.Background(), `UPDATE jetrelay_inbox SET status = 'processing', claimed_by = 'crashed',
		claimed_until = now() + interval '300 milliseconds', next_attempt_at = now() + interval '300 milliseconds', attempt_count = 1`); err != nil {
		t.Fatal(err)
	}
	startInbox(t, inbox.Config{PostgresURL: pg.URL, Forward: url, PollInterval: 20 * time.Millisecond})
	for i := range 5 {
		id := fmt.Sprintf("evt-lease-%d", i)
		await(t, id+" is done", func() bool { return status(t, intake, id) == inbox.StatusDone })
		if tg.count(id) != 1 {
			t.Fatalf("%s forwarded %d times, want 1", id, tg.count(id))
		}
	}
}

func TestMigrate_IsIdempotentAcrossConcurrentStarts(t *testing.T) {
	pg := database(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- inbox.Migrate(context.Background(), pg.Pool) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var v int
	if err := pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM jetrelay_inbox_schema`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("schema versions recorded: %d (err %v), want 1", v, err)
	}
}
