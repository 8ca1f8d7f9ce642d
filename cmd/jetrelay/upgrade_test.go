package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
)

// previousRelease is the git revision of the release before this one: the
// upgrade test runs it beside the current code. Move it forward at each
// release.
const previousRelease = "4d93ee9"

// buildRelease builds jetrelay at a git revision of this repository (from
// `git archive`, so the repository itself is not touched; modules come from
// the module cache or proxy).
func buildRelease(t *testing.T, rev string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	archive := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repoRoot(t), rev, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s (the test needs the repository's history): %v\n%s", rev, err, out)
	}
	bin := filepath.Join(dir, "jetrelay-"+rev)
	build := exec.CommandContext(ctx, filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./cmd/jetrelay")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build jetrelay at %s: %v\n%s", rev, err, out)
	}
	return bin
}

// TestUpgrade_RollForwardAndBackSideBySideLosesNothing runs two replicas of
// the previous release on one stream (a NATS server over TCP), replaces them
// one at a time with the current build while deliveries are in flight (old
// and new side by side, both reconciling the stream and consumer at
// start-up), then rolls back the same way. Every delivery admin wrote
// arrives, correctly signed, and ends SUCCESS.
func TestUpgrade_RollForwardAndBackSideBySideLosesNothing(t *testing.T) {
	old := buildRelease(t, previousRelease)
	b := newBed(t)
	var arrived sync.Map
	_, ep := b.endpoint(t, "/hook", "budget.exhausted", func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Slow enough that each replacement finds sends in flight.
			time.Sleep(150 * time.Millisecond)
			arrived.Store(r.Header.Get("X-Cycles-Event-Id"), true)
			next.ServeHTTP(w, r)
		})
	})

	var (
		mu  sync.Mutex
		ids []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		pace := time.NewTicker(40 * time.Millisecond)
		defer pace.Stop()
		for {
			select {
			case <-stop:
				return
			case <-pace.C:
			}
			_, got, err := b.writer.Emit(context.Background(), event("budget.exhausted"), admin.TraceSnapshot{})
			if err != nil {
				t.Errorf("emit: %v", err)
				return
			}
			mu.Lock()
			ids = append(ids, got...)
			mu.Unlock()
		}
	})

	env := func(id string) map[string]string {
		return b.env("JETRELAY_BRIDGE_ID", id, "JETRELAY_DRAIN_TIMEOUT", "5s", "JETRELAY_ACK_WAIT", "3s")
	}
	replicas := map[string]*relay{
		"replica-a": startRelayBinary(t, old, env("replica-a")),
		"replica-b": startRelayBinary(t, old, env("replica-b")),
	}
	// replace stops one replica with SIGTERM, as a rolling update does,
	// and starts binary in its place with the same bridge id.
	replace := func(id, binary, what string) {
		t.Helper()
		inFlight := ep.Stats().Requests
		_ = replicas[id].cmd.Process.Signal(syscall.SIGTERM)
		if code := replicas[id].wait(t, 30*time.Second); code != 0 {
			t.Errorf("%s (%s) exited %d after SIGTERM", id, what, code)
		}
		replicas[id] = startRelayBinary(t, binary, env(id))
		replicas[id].awaitHTTP(t, "/readyz", http.StatusOK, 60*time.Second)
		// Let both versions work side by side for a while.
		deadline := time.Now().Add(20 * time.Second)
		for ep.Stats().Requests < inFlight+10 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%s now runs %s; receiver has %d requests", id, what, ep.Stats().Requests)
	}
	replace("replica-a", binaryPath, "the current build")
	replace("replica-b", binaryPath, "the current build")
	ordered := orderedPhase(t, b, env("replica-a"))
	replace("replica-a", old, previousRelease+" (rollback)")
	replace("replica-b", old, previousRelease+" (rollback)")
	// The subscription that was ordered keeps getting deliveries under the
	// older release (in parallel, as that release sends everything).
	ordered.emit(t, 20)
	close(stop)
	wg.Wait()

	mu.Lock()
	all := append([]string(nil), ids...)
	mu.Unlock()
	if len(all) < 40 {
		t.Fatalf("only %d deliveries were written during the rollout, want a stream of them", len(all))
	}
	b.awaitSuccess(t, all, 120*time.Second)
	st := ep.Stats()
	t.Logf("%d deliveries across the roll forward and back; receiver: %+v", len(all), st)
	if st.Unique != len(all) || st.BadSig != 0 {
		t.Errorf("receiver accepted %d distinct events (%d bad signatures), want all %d correctly signed", st.Unique, st.BadSig, len(all))
	}
	// docs/deployment.md: ordering switched off and the lines drained
	// before the rollback, nothing is lost.
	b.awaitSuccess(t, ordered.ids, 60*time.Second)
	if got := ordered.ep.Stats().Unique; got != len(ordered.ids) {
		t.Errorf("the ordered subscription's receiver accepted %d distinct events, want all %d: lost across the rollback", got, len(ordered.ids))
	}
}

// upgradeOrdered is the upgrade test's ordered subscription.
type upgradeOrdered struct {
	b    *bed
	id   string
	ep   *receiver.Endpoint
	ids  []string // its deliveries
	gate chan struct{}
}

func (o *upgradeOrdered) emit(t *testing.T, n int) []string {
	t.Helper()
	var events []string
	for range n {
		ev, ids, err := o.b.writer.Emit(context.Background(), event("budget.threshold_crossed"), admin.TraceSnapshot{})
		if err != nil {
			t.Fatalf("emit: %v", err)
		}
		o.ids = append(o.ids, ids...)
		events = append(events, ev)
	}
	return events
}

// orderedPhase runs while every replica runs the current build: a
// subscription made first-attempt through the binary gets its deliveries
// in order. Then, as docs/deployment.md asks before rolling back below
// ordered delivery, its ordering is set to none and the test waits until
// `jetrelay status` shows no ordered line holding work.
func orderedPhase(t *testing.T, b *bed, env map[string]string) *upgradeOrdered {
	t.Helper()
	o := &upgradeOrdered{b: b, gate: make(chan struct{})}
	o.id, o.ep = b.endpoint(t, "/ordered", "budget.threshold_crossed", func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-o.gate
			next.ServeHTTP(w, r)
		})
	})
	setOrdering := func(mode string) {
		t.Helper()
		if code, out := runBinary(t, env, 20*time.Second, "subscriptions", "ordering", o.id, mode); code != 0 {
			t.Fatalf("subscriptions ordering %s %s: exit %d, output %q", o.id, mode, code, out)
		}
	}
	setOrdering("first-attempt")
	// Each bridge picks the setting up within about a second of its own
	// (docs/ordering.md): probes until one is held on the subscription's
	// line (its receiver holds every request meanwhile, so the line keeps
	// it), and for two seconds more, so the other bridge has it too; then
	// the measured events.
	lines := func() map[string]uint64 {
		t.Helper()
		code, out := runBinary(t, env, 20*time.Second, "status", "--json")
		var rep struct {
			Ordering struct {
				Lines map[string]uint64 `json:"lines"`
			} `json:"ordering"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("status --json: exit %d, output %q", code, out)
		}
		return rep.Ordering.Lines
	}
	deadline := time.Now().Add(30 * time.Second)
	for lines()[o.id] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no delivery of the ordered subscription reached its line within 30s")
		}
		o.emit(t, 1)
	}
	for settled := time.Now().Add(2 * time.Second); time.Now().Before(settled); {
		o.emit(t, 1)
		time.Sleep(100 * time.Millisecond)
	}
	events := o.emit(t, 40)
	close(o.gate)
	b.awaitSuccess(t, o.ids, 60*time.Second)
	var firsts []string
	seen := map[string]bool{}
	for _, d := range o.ep.Deliveries() {
		if slices.Contains(events, d.EventID) && !seen[d.EventID] {
			seen[d.EventID] = true
			firsts = append(firsts, d.EventID)
		}
	}
	if !slices.Equal(firsts, events) {
		t.Errorf("first attempts under the current build in the order %v, want the emit order %v", firsts, events)
	}

	setOrdering("none")
	o.emit(t, 20)
	b.awaitSuccess(t, o.ids, 60*time.Second)
	deadline = time.Now().Add(30 * time.Second)
	for len(lines()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("ordered lines still hold work 30s after ordering was switched off: %v", lines())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return o
}
