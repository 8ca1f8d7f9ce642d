package jetrelaycmd_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// The plugin a plugin author writes in a module of their own: flaky://
// refuses each event's first attempt (a protocol-level "no") and then
// "delivers" it by writing the body to a file named after the event id in
// the URL's directory.
const pluginSource = `package myplugin

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jetrelay/jetrelay/transport"
)

func init() { transport.Register("flaky", driver{}) }

type driver struct{}

func (driver) Open(context.Context, transport.Env) (transport.Transport, error) {
	return &sink{seen: map[string]int{}}, nil
}

func (driver) ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !filepath.IsAbs(u.Path) {
		return errors.New("flaky: the URL must name an absolute directory: flaky:///path")
	}
	return nil
}

type sink struct {
	mu   sync.Mutex
	seen map[string]int
}

func (s *sink) Deliver(ctx context.Context, req *transport.Request) (transport.Result, error) {
	start := time.Now()
	s.mu.Lock()
	s.seen[req.EventID]++
	n := s.seen[req.EventID]
	s.mu.Unlock()
	if n == 1 {
		return transport.Result{Outcome: transport.Failed, Latency: time.Since(start), Message: "flaky: first attempt refused"}, nil
	}
	u, _ := url.Parse(req.URL)
	if err := os.WriteFile(filepath.Join(u.Path, req.EventID), req.Body, 0o600); err != nil {
		return transport.Result{Latency: time.Since(start)}, err
	}
	return transport.Result{Outcome: transport.Delivered, Latency: time.Since(start)}, nil
}
`

// The plugin author's whole binary, as docs/transports.md shows it.
const mainSource = `package main

import (
	jetrelaycmd "github.com/jetrelay/jetrelay/cmd"
	_ "example.com/myplugin"
)

func main() { jetrelaycmd.Main() }
`

// A plugin author ships a binary from modules of their own, outside this
// tree, with nothing copied from jetrelay: the plugin module and a main
// module of a few lines that require this checkout (a replace, as for an
// unpublished version). The binary runs jetrelay with the plugin compiled
// in, and an event reaches the plugin's destination after a retry.
func TestPluginBinary_BuiltFromItsOwnModuleDeliversThroughThePluginAfterARetry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a jetrelay binary from a temporary module")
	}
	bin := buildPluginBinary(t)

	r := testenv.Redis(t)
	outDir := t.TempDir()
	env := []string{"REDIS_URL=" + r.Server.URL()}

	out := run(t, bin, env, "subscriptions", "create", "--url", "flaky://"+outDir, "--tenant", "tenant-plugin",
		"--event-types", "budget.exhausted", "--initial-delay-ms", "100")
	if !strings.Contains(out, "subscription_id: ") {
		t.Fatalf("subscriptions create printed no id:\n%s", out)
	}
	if out, err := runErr(bin, env, "subscriptions", "create", "--url", "flaky://relative", "--event-types", "budget.exhausted"); err == nil {
		t.Errorf("subscriptions create accepted a URL the plugin refuses:\n%s", out)
	}

	logs := startRun(t, bin, append(env, "JETRELAY_DATA_DIR="+t.TempDir(), "MANAGEMENT_PORT=0", "JETRELAY_BRIDGE_ID=plugin-test"))
	w := admin.NewWriter(r.Client, nil)
	eventID, ids, err := w.Emit(context.Background(), admin.Event{
		EventType: "budget.exhausted", TenantID: "tenant-plugin", Scope: "tenant:tenant-plugin",
		Source: "cycles-server", Data: []byte(`{"remaining":0}`), TraceID: proto.NewTraceID(),
	}, admin.TraceSnapshot{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("emit: %v (deliveries %v)", err, ids)
	}

	st := store.New(r.Client)
	deadline := time.Now().Add(60 * time.Second)
	for {
		rec, err := st.Delivery(context.Background(), ids[0])
		if err == nil && rec.Status == proto.DeliverySuccess {
			if rec.Attempts != 2 {
				t.Errorf("delivered after %d attempts, want 2 (one refusal, one retry)", rec.Attempts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s not SUCCESS after 60s (last %+v, %v); jetrelay logs:\n%s", ids[0], rec, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	body, err := os.ReadFile(filepath.Join(outDir, eventID))
	if err != nil {
		t.Fatalf("the plugin's destination has no file for %s: %v", eventID, err)
	}
	if stored, _ := r.Client.Get(context.Background(), store.EventKey(eventID)).Bytes(); !bytes.Equal(body, stored) {
		t.Errorf("the plugin received %q, want the stored event %q", body, stored)
	}
	if !strings.Contains(logs.String(), "flaky") {
		t.Errorf("the start-up log does not list the plugin's scheme among the compiled-in transports:\n%s", logs.String())
	}
}

// buildPluginBinary writes the plugin module and the main module to a
// temporary directory and builds the binary. -mod=mod lets go complete the
// modules' requirements from this checkout's go.mod; the checkout's go.sum
// covers every dependency, so the build needs no network beyond what
// GOPROXY already serves from the module cache.
func buildPluginBinary(t *testing.T) string {
	t.Helper()
	checkout, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(checkout, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	files := map[string]string{
		"myplugin/go.mod":      "module example.com/myplugin\n\ngo 1.26.0\n\nrequire github.com/jetrelay/jetrelay v0.0.0\n\nreplace github.com/jetrelay/jetrelay => " + checkout + "\n",
		"myplugin/go.sum":      string(sum),
		"myplugin/myplugin.go": pluginSource,
		"relay/go.mod": "module example.com/relay\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/jetrelay/jetrelay v0.0.0\n\texample.com/myplugin v0.0.0\n)\n\n" +
			"replace (\n\tgithub.com/jetrelay/jetrelay => " + checkout + "\n\texample.com/myplugin => ../myplugin\n)\n",
		"relay/go.sum":  string(sum),
		"relay/main.go": mainSource,
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(root, "relay-bin")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	build.Dir = filepath.Join(root, "relay")
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the plugin author's binary: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv is the test's environment without the developer's jetrelay and
// Redis settings, plus env.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JETRELAY_") && !strings.HasPrefix(kv, "REDIS_") && !strings.HasPrefix(kv, "NATS_URL=") &&
			!strings.HasPrefix(kv, "MANAGEMENT_PORT=") && !strings.HasPrefix(kv, "WEBHOOK_SECRET_ENCRYPTION_KEY=") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

func runErr(bin string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv(env)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func run(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	out, err := runErr(bin, env, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return out
}

// startRun starts `run` until the test ends and returns its logs.
func startRun(t *testing.T, bin string, env []string) *lockedBuffer {
	t.Helper()
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "run")
	cmd.Env = cleanEnv(env)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return logs
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
