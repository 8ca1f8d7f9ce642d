package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport/receive"
	"github.com/jetrelay/jetrelay/transport/receive/redisstore"
)

// startInboxProcess starts `jetrelay inbox serve` with args as its own
// process (so it can be SIGKILLed) and kills it when the test ends.
func startInboxProcess(t *testing.T, args ...string) *relay {
	t.Helper()
	p := &relay{logs: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binaryPath, append([]string{"inbox", "serve"}, args...)...)
	p.cmd.Env = commandEnv(nil)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	setDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start jetrelay inbox: %v", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("jetrelay inbox (pid %d) output, last 8 KiB:\n%s", p.cmd.Process.Pid, p.logs.tail(8<<10))
		}
	})
	return p
}

// actingTarget is the service behind the inbox: it verifies, dedupes by the
// event id the inbox passes on (in Redis) and acts on each event.
type actingTarget struct {
	mu    sync.Mutex
	seen  map[string]int // forwards received per event id
	acted map[string]int // side effects run per event id
}

func (a *actingTarget) counts() (seen, acted, actedTwice int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.acted {
		if n > 1 {
			actedTwice++
		}
	}
	return len(a.seen), len(a.acted), actedTwice
}

func TestInbox_EveryEventOfAThousandDeliveriesAndTwoHundredReplaysIsActedOnOnceThroughAForwarderCrash(t *testing.T) {
	t.Parallel()
	const events, replays = 1000, 200
	b := newBed(t)
	pg := testenv.Postgres(t)
	intakePort := freePort(t)
	subID, secret, err := b.writer.CreateSubscription(context.Background(), admin.Subscription{
		TenantID: "tenant-proc", Name: "inbox", URL: fmt.Sprintf("http://127.0.0.1:%d/", intakePort),
		EventTypes: []string{"budget.exhausted"},
	})
	if err != nil {
		t.Fatal(err)
	}

	// The forward target dedupes with the public package, as a user would.
	tgt := &actingTarget{seen: map[string]int{}, acted: map[string]int{}}
	verifier, err := receive.NewVerifier([]string{secret})
	if err != nil {
		t.Fatal(err)
	}
	dedupe := receive.NewDeduper(redisstore.New(b.redis.Client, redisstore.WithPrefix("target:")))
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tgt.mu.Lock()
		tgt.seen[r.Header.Get(proto.HeaderEventID)]++
		tgt.mu.Unlock()
		verifier.Middleware(dedupe.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Millisecond) // a side effect takes a moment: forwards are in flight when the crash comes
			tgt.mu.Lock()
			tgt.acted[r.Header.Get(proto.HeaderEventID)]++
			tgt.mu.Unlock()
		}))).ServeHTTP(w, r)
	}))
	t.Cleanup(target.Close)

	pgArgs := []string{"--postgres-url", pg.URL}
	startInboxProcess(t, append(pgArgs, "--listen", "127.0.0.1:"+strconv.Itoa(intakePort), "--workers", "-1", "--secret", secret)...)
	awaitListening(t, intakePort)
	forwarderArgs := append(pgArgs, "--listen", "", "--forward", target.URL, "--lease", "2s", "--forward-timeout", "1s", "--batch", "16")
	forwarder := startInboxProcess(t, forwarderArgs...)

	// A forged delivery is refused and stored nowhere.
	forged, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/", intakePort), strings.NewReader(`{"event_id":"evt_forged"}`))
	forged.Header.Set(proto.HeaderEventID, "evt_forged")
	forged.Header.Set(proto.HeaderSignature, proto.Sign("whsec_guess", []byte(`{"event_id":"evt_forged"}`)))
	resp, err := http.DefaultClient.Do(forged)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged delivery answered %d, want 401", resp.StatusCode)
	}

	var eventIDs, deliveryIDs []string
	for range events {
		eid, ids, err := b.writer.Emit(context.Background(), event("budget.exhausted"), admin.TraceSnapshot{})
		if err != nil || len(ids) != 1 {
			t.Fatalf("emit: %v (%d deliveries)", err, len(ids))
		}
		eventIDs, deliveryIDs = append(eventIDs, eid), append(deliveryIDs, ids...)
	}
	started := time.Now()
	startRelay(t, b.env("JETRELAY_WORKERS", "32"))

	// Kill the forwarder with SIGKILL once it is well under way, then replay
	// 200 events under new delivery ids (admin's replay) and start another.
	awaitCondition(t, "the forwarder has acted on 300 events", 90*time.Second, func() bool { _, acted, _ := tgt.counts(); return acted >= 300 })
	forwarder.kill(t)
	_, actedAtKill, _ := tgt.counts()
	for _, eid := range eventIDs[:replays] {
		id := admin.NewRandomDeliveryID()
		if _, err := b.writer.Enqueue(context.Background(), admin.Delivery{DeliveryID: id, SubscriptionID: subID, EventID: eid, EventType: "budget.exhausted"}); err != nil {
			t.Fatal(err)
		}
		deliveryIDs = append(deliveryIDs, id)
	}
	startInboxProcess(t, forwarderArgs...)

	b.awaitSuccess(t, deliveryIDs, 90*time.Second)
	awaitCondition(t, "every event is acted on", 90*time.Second, func() bool { _, acted, _ := tgt.counts(); return acted == events })
	awaitCondition(t, "every inbox row is done", 30*time.Second, func() bool {
		var done int
		_ = pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM jetrelay_inbox WHERE status = 'done'`).Scan(&done)
		return done == events
	})
	seen, acted, twice := tgt.counts()
	var rows, forgedRows int
	if err := pg.Pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE event_id = 'evt_forged') FROM jetrelay_inbox`).Scan(&rows, &forgedRows); err != nil {
		t.Fatal(err)
	}
	tgt.mu.Lock()
	forwards := 0
	for _, n := range tgt.seen {
		forwards += n
	}
	missing := 0
	for _, eid := range eventIDs {
		if tgt.acted[eid] != 1 {
			missing++
		}
	}
	tgt.mu.Unlock()
	t.Logf("%d deliveries (%d replays) in %s; forwarder killed after %d events acted on; %d forwards of %d events reached the target",
		len(deliveryIDs), replays, time.Since(started).Round(time.Millisecond), actedAtKill, forwards, seen)
	switch {
	case actedAtKill >= events:
		t.Fatalf("the forwarder was killed after all %d events were acted on, not mid-way", events)
	case seen != events || acted != events || twice != 0 || missing != 0:
		t.Fatalf("target saw %d events, acted on %d (%d twice, %d emitted events not exactly once); want %d, %d, 0, 0", seen, acted, twice, missing, events, events)
	case rows != events || forgedRows != 0:
		t.Fatalf("inbox holds %d rows (%d forged), want %d and 0", rows, forgedRows, events)
	}
}

func awaitListening(t *testing.T, port int) {
	t.Helper()
	awaitCondition(t, "the inbox intake listens", 30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func awaitCondition(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
