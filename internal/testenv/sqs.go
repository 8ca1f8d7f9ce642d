package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/freeport"
)

// FauxqsVersion is the SQS-compatible server the tests run (npm package).
const FauxqsVersion = "1.9.2"

// SQSEnv is a running fauxqs server.
type SQSEnv struct {
	// Endpoint is the server's base URL, for an SDK's endpoint override.
	Endpoint string
	// Host is the host:port part of the queue URLs it hands out
	// (sqs.us-east-1.localhost:<port>).
	Host string
}

// QueueURL is the queue URL fauxqs gives queue name.
func (e *SQSEnv) QueueURL(name string) string { return "http://" + e.Host + "/000000000000/" + name }

// SubscriptionURL is the sqs:// subscription URL of queue name.
func (e *SQSEnv) SubscriptionURL(name string) string {
	return "sqs://" + e.Host + "/000000000000/" + name
}

// SQS starts fauxqs (installed by `go tool task deps:fauxqs` under the
// module's .cache/fauxqs, or where JETRELAY_FAUXQS_DIR points) on a free
// port and stops it when the test ends. A missing install or a server that
// does not start fails the test, with the command that fixes it.
func SQS(t testing.TB) *SQSEnv {
	t.Helper()
	cli, err := fauxqsCLI()
	if err != nil {
		t.Fatalf("testenv: these tests need the SQS-compatible server fauxqs %s: %v\n"+
			"install it with: go tool task deps:fauxqs (npm install --prefix .cache/fauxqs fauxqs@%s; needs Node 20+)", FauxqsVersion, err, FauxqsVersion)
	}
	port, err := freeport.One()
	if err != nil {
		t.Fatalf("testenv: free port for fauxqs: %v", err)
	}
	cmd := exec.Command("node", cli)
	cmd.Env = append(os.Environ(), "FAUXQS_PORT="+strconv.Itoa(port), "FAUXQS_HOST=localhost")
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start fauxqs (node %s): %v", cli, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	env := &SQSEnv{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), Host: "sqs.us-east-1.localhost:" + strconv.Itoa(port)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.Endpoint+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return env
		}
		select {
		case <-exited:
			t.Fatalf("testenv: fauxqs exited before it listened:\n%s", out.String())
		case <-ctx.Done():
			t.Fatalf("testenv: fauxqs did not listen on port %d within 30s:\n%s", port, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func fauxqsCLI() (string, error) {
	dir := os.Getenv("JETRELAY_FAUXQS_DIR")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".cache", "fauxqs")
	}
	cli := filepath.Join(dir, "node_modules", "fauxqs", "dist", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		return "", fmt.Errorf("%s not found", cli)
	}
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node is not on PATH")
	}
	return cli, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// tailBuffer keeps the last 8 KiB a child process wrote, for failures.
type tailBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if w.b.Len() > 8<<10 {
		rest := w.b.Bytes()[w.b.Len()-8<<10:]
		w.b = *bytes.NewBuffer(append([]byte(nil), rest...))
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(w.b.String())
}
