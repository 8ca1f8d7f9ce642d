package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeWalkthrough is the README's "first real delivery" block, between
// its markers.
func readmeWalkthrough(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- first-delivery:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- first-delivery:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no first-delivery block")
	}
	block = strings.TrimSpace(block)
	block = strings.TrimPrefix(block, "```sh")
	return strings.TrimSuffix(block, "```")
}

func TestReadme_FirstRealDeliveryWalkthroughWorksAsWritten(t *testing.T) {
	for _, tool := range []string{"bash", "redis-server", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walk-through needs %s on PATH: %v", tool, err)
		}
	}
	script := readmeWalkthrough(t)
	// The README's ports, swapped for free ones so the test never meets a
	// service already on the machine; nothing else is changed.
	for _, port := range []string{"6399", "9099", "4299", "9989"} {
		if !strings.Contains(script, port) {
			t.Fatalf("the walk-through no longer uses port %s; update this test", port)
		}
		script = strings.ReplaceAll(script, port, strconv.Itoa(freePort(t)))
	}
	// What a user's shell does when they close it: stop the background jobs.
	script = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n" + script

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	// The user's environment has none of the SSRF overrides: the script
	// sets the ones it needs.
	env := commandEnv(map[string]string{"JETRELAY_SSRF_ALLOW_CIDRS": "", "JETRELAY_SSRF_ALLOW_HTTP": ""})
	cmd.Env = append(env, "PATH="+filepath.Dir(binaryPath)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	logs, _ := os.ReadFile(filepath.Join(dir, "jetrelay.log"))
	if err != nil {
		t.Fatalf("the walk-through failed: %v\n%s\n--- jetrelay.log ---\n%s", err, out, logs)
	}
	for _, want := range []string{
		"subscription_id: whsub_",
		"delivery_id: del_",
		`received budget.exhausted {"event_id":"evt_`,
		`"budget_id":"b_1"`,
		"status", "SUCCESS",
		"done: the delivery is SUCCESS",
		"alive",
		// status read run's own part from GET /status on its management port
		"role all; breakers 1 closed",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("walk-through output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "warning: jetrelay run will refuse") {
		t.Errorf("subscriptions create warned although the walk-through allows the URL:\n%s", out)
	}
	if !strings.Contains(string(logs), "redis=127.0.0.1:") || !strings.Contains(string(logs), "nats=\"embedded JetStream") {
		t.Errorf("run did not log its Redis address and NATS mode:\n%s", logs)
	}
}
