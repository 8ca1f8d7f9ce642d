package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/freeport"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/receiver"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// binaryPath is the jetrelay binary TestMain builds once for every test.
var binaryPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jetrelay-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir for the jetrelay binary:", err)
		os.Exit(1)
	}
	binaryPath = filepath.Join(dir, "jetrelay")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binaryPath, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build jetrelay:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	removeTestImages()
	os.RemoveAll(dir)
	os.Exit(code)
}

// loopbackAllowed lets a relay under test reach receivers on 127.0.0.1 over
// plain http, which the SSRF guard's defaults refuse: the operator
// allow-list and http override, explicitly. A test of the guard itself
// overrides them (an empty value turns them off).
var loopbackAllowed = map[string]string{
	"JETRELAY_SSRF_ALLOW_CIDRS": "127.0.0.0/8",
	"JETRELAY_SSRF_ALLOW_HTTP":  "true",
}

// commandEnv is the test process's environment without jetrelay settings,
// plus loopbackAllowed and env: the developer's own settings must never
// leak into a test.
func commandEnv(env map[string]string) []string {
	ownSettings := []string{
		"JETRELAY_", "REDIS_", "NATS_URL=", "MANAGEMENT_PORT=", "WEBHOOK_SECRET_ENCRYPTION_KEY=",
		"MAX_DELIVERY_AGE_MS=", "EVENT_TTL_DAYS=", "DELIVERY_TTL_DAYS=",
	}
	var out []string
next:
	for _, kv := range os.Environ() {
		for _, p := range ownSettings {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		out = append(out, kv)
	}
	for k, v := range loopbackAllowed {
		if _, set := env[k]; !set {
			out = append(out, k+"="+v)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// runBinary runs jetrelay to completion (bounded by a deadline) and returns
// its exit code and combined output.
func runBinary(t *testing.T, env map[string]string, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binaryPath, args...)
	cmd.Env = commandEnv(env)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("jetrelay %s did not finish within %s; output:\n%s", strings.Join(args, " "), timeout, out.String())
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	default:
		t.Fatalf("run jetrelay: %v", err)
		return -1, ""
	}
}

// relay is one running `jetrelay run` process.
type relay struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	mgmt string // base URL of /healthz and /readyz
	done chan struct{}
	err  error // valid once done is closed
}

// startRelay starts `jetrelay run` with env on top of per-process
// defaults (management server on a free loopback port, a private data dir)
// and waits until /healthz answers. The process is killed when the test ends
// if it is still running; its logs are shown when the test failed.
func startRelay(t *testing.T, env map[string]string) *relay {
	t.Helper()
	return startRelayBinary(t, binaryPath, env)
}

// startRelayBinary is startRelay with another jetrelay binary (an older
// release, for upgrade tests).
func startRelayBinary(t *testing.T, binary string, env map[string]string) *relay {
	t.Helper()
	port := freePort(t)
	full := map[string]string{
		"MANAGEMENT_PORT":          strconv.Itoa(port),
		"JETRELAY_MANAGEMENT_HOST": "127.0.0.1",
		"JETRELAY_DATA_DIR":        t.TempDir(),
	}
	for k, v := range env {
		full[k] = v
	}
	r := &relay{logs: &syncBuffer{}, mgmt: "http://" + net.JoinHostPort("127.0.0.1", full["MANAGEMENT_PORT"]), done: make(chan struct{})}
	r.cmd = exec.Command(binary, "run")
	r.cmd.Env = commandEnv(full)
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	setDeathSignal(r.cmd)
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start jetrelay: %v", err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.kill(t)
		if t.Failed() {
			t.Logf("jetrelay (pid %d) output, last 8 KiB:\n%s", r.cmd.Process.Pid, r.logs.tail(8<<10))
		}
	})
	r.awaitHTTP(t, "/healthz", http.StatusOK, 15*time.Second)
	return r
}

// kill ends the process with SIGKILL, as a crash or an OOM kill would, and
// waits until it is gone.
func (r *relay) kill(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
		return
	default:
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Logf("SIGKILL jetrelay: %v", err)
	}
	<-r.done
}

// wait waits for the process to exit on its own and returns its exit code.
func (r *relay) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(within):
		t.Fatalf("jetrelay still running %s after it was asked to stop", within)
	}
	var exit *exec.ExitError
	switch {
	case r.err == nil:
		return 0
	case errors.As(r.err, &exit):
		return exit.ExitCode()
	default:
		t.Fatalf("wait for jetrelay: %v", r.err)
		return -1
	}
}

// get fetches a management path; it returns status 0 when nothing answers.
func (r *relay) get(path string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(r.mgmt + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// awaitHTTP polls a management path until it answers want, failing the test
// (with the last answer) at the deadline or when the process exits.
func (r *relay) awaitHTTP(t *testing.T, path string, want int, within time.Duration) string {
	t.Helper()
	var code int
	var body string
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			t.Fatalf("jetrelay exited (%v) while waiting for %s to answer %d; output:\n%s", r.err, path, want, r.logs.tail(8<<10))
		default:
		}
		if code, body = r.get(path); code == want {
			return body
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s answered %d %q, want %d within %s", path, code, body, want, within)
	return ""
}

// freePort returns a loopback port nothing listens on right now and that
// no earlier call in this test binary returned (freeport.One).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.One()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return port
}

// bed is what `jetrelay run` runs against in a test: a real redis-server, a
// NATS server listening on a free loopback port, and a verifying receiver.
type bed struct {
	redis    *testenv.RedisEnv
	nats     *natsserver.Server
	keyB64   string // WEBHOOK_SECRET_ENCRYPTION_KEY
	writer   *admin.Writer
	store    *store.Store
	recv     *receiver.Receiver
	mux      *http.ServeMux
	recvBase string
}

func newBed(t *testing.T) *bed {
	t.Helper()
	b := &bed{redis: testenv.Redis(t), recv: receiver.New(), mux: http.NewServeMux()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ns, err := natsserver.Start(ctx, natsserver.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(ns.Shutdown)
	b.nats = ns
	b.equip(t)
	return b
}

// equip gives b a fresh encryption key, an admin writer that stores secrets
// encrypted with it, a store, and a receiver server behind b.mux.
func (b *bed) equip(t *testing.T) {
	t.Helper()
	raw := make([]byte, 32)
	rand.Read(raw)
	b.keyB64 = base64.StdEncoding.EncodeToString(raw)
	key, err := proto.ParseSecretKey(b.keyB64)
	if err != nil {
		t.Fatalf("parse generated key: %v", err)
	}
	b.writer = admin.NewWriter(b.redis.Client, key)
	b.store = store.New(b.redis.Client)

	srv := httptest.NewServer(b.mux)
	t.Cleanup(srv.Close)
	b.recvBase = srv.URL
}

// env is the environment of a jetrelay process on this bed.
func (b *bed) env(extra ...string) map[string]string {
	env := map[string]string{
		"REDIS_URL":                     b.redis.Server.URL(),
		"NATS_URL":                      b.nats.ClientURL(),
		"WEBHOOK_SECRET_ENCRYPTION_KEY": b.keyB64,
		"JETRELAY_BRIDGE_ID":            "bridge-under-test",
		"JETRELAY_WORKERS":              "8",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// endpoint subscribes a receiver endpoint at path to eventType (admin's
// create, encrypted secret) and serves it through wrap, which may hold or
// slow requests down. It returns the subscription id and the endpoint.
func (b *bed) endpoint(t *testing.T, path, eventType string, wrap func(http.Handler) http.Handler) (string, *receiver.Endpoint) {
	t.Helper()
	id, secret, err := b.writer.CreateSubscription(context.Background(), admin.Subscription{
		TenantID: "tenant-proc", Name: "process test " + path, URL: b.recvBase + path,
		EventTypes: []string{eventType},
	})
	if err != nil {
		t.Fatalf("create subscription: %v", err)
	}
	ep := b.recv.Handle(path, secret, receiver.Healthy())
	var h http.Handler = b.recv
	if wrap != nil {
		h = wrap(h)
	}
	b.mux.Handle(path, h)
	return id, ep
}

// emit saves n events of eventType and enqueues their deliveries as
// admin's live dispatch does, returning the delivery ids.
func (b *bed) emit(t *testing.T, eventType string, n int) []string {
	t.Helper()
	var all []string
	for range n {
		_, ids, err := b.writer.Emit(context.Background(), event(eventType), admin.TraceSnapshot{})
		if err != nil {
			t.Fatalf("emit: %v", err)
		}
		all = append(all, ids...)
	}
	return all
}

func event(eventType string) admin.Event {
	return admin.Event{
		EventType: eventType, TenantID: "tenant-proc", Scope: "tenant:tenant-proc",
		Source: "cycles-server", Data: []byte(`{"ledger_id":"led_1","remaining":0}`), TraceID: proto.NewTraceID(),
	}
}

// statuses reads the status of every delivery; a missing or unreadable
// record shows as its error.
func (b *bed) statuses(ids []string) map[string]proto.DeliveryStatus {
	out := make(map[string]proto.DeliveryStatus, len(ids))
	for _, id := range ids {
		rec, err := b.store.Delivery(context.Background(), id)
		if err != nil {
			out[id] = proto.DeliveryStatus("error: " + err.Error())
			continue
		}
		out[id] = rec.Status
	}
	return out
}

// awaitSuccess polls until every delivery is SUCCESS, failing with the
// statuses that were not at the deadline.
func (b *bed) awaitSuccess(t *testing.T, ids []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := map[string]proto.DeliveryStatus{}
		for id, st := range b.statuses(ids) {
			if st != proto.DeliverySuccess {
				left[id] = st
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries not SUCCESS after %s: %v", len(left), len(ids), within, sample(left, 5))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sample(m map[string]proto.DeliveryStatus, n int) string {
	var parts []string
	for id, st := range m {
		if len(parts) == n {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, id+"="+string(st))
	}
	return strings.Join(parts, " ")
}

// hold is a receiver front that keeps every request waiting until open is
// called. A request whose sender goes away (a killed or draining engine)
// still reaches the receiver, as it would reach a real destination that
// processed the webhook but whose answer was lost; the redelivery that
// follows then shows up as a duplicate.
type hold struct {
	next    http.Handler
	release chan struct{}
	once    sync.Once
	entered atomic.Int64
	arrived chan struct{}
}

func newHold() *hold { return &hold{release: make(chan struct{}), arrived: make(chan struct{}, 1)} }

func (h *hold) wrap(next http.Handler) http.Handler { h.next = next; return h }

func (h *hold) open() { h.once.Do(func() { close(h.release) }) }

func (h *hold) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Reading the body first lets net/http notice a sender that disconnects.
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.entered.Add(1)
	select {
	case h.arrived <- struct{}{}:
	default:
	}
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	h.next.ServeHTTP(w, r)
}

// awaitHeld waits until at least n requests are being held.
func (h *hold) awaitHeld(t *testing.T, n int64, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for h.entered.Load() < n {
		select {
		case <-h.arrived:
		case <-timeout:
			t.Fatalf("receiver holds %d requests, want %d within %s", h.entered.Load(), n, within)
		}
	}
}

// slow is a receiver front that answers every request after delay, like a
// destination that takes its time.
func slow(delay time.Duration, arrived *atomic.Int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived.Add(1)
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
			}
			next.ServeHTTP(w, r)
		})
	}
}

// syncBuffer is an io.Writer safe for a child's stdout and stderr at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) tail(n int) string {
	out := s.String()
	if len(out) > n {
		out = "…" + out[len(out)-n:]
	}
	return out
}
