package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The benchmark itself is a command, not a test; this runs it with tiny
// numbers so `jetrelay bench` keeps working.
func TestBench_IsolationScenarioWritesItsDocument(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and an embedded JetStream twice")
	}
	out := filepath.Join(t.TempDir(), "docs", "isolation.md")
	args := []string{"bench", "--scenario", "isolation", "--healthy-subs", "2", "--rate", "40", "--duration", "1s",
		"--bad-deliveries", "30", "--slow-delay", "300ms", "--settle", "20s", "--out", out}
	var stdout, stderr bytes.Buffer
	if code := realMain(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"go run ./cmd/jetrelay bench --scenario isolation --healthy-subs 2", // the command that reproduces it
		"| deliveries SUCCESS / expected | 40 / 40 | 40 / 40 |",             // every healthy delivery arrived in both phases
		"| dead | connection refused | 30 |",
		"| black hole | accepts, never answers | 30 |",
		"| slow | answers 200 after 300ms | 30 |",
		"CPUs", "How jetrelay keeps one bad endpoint",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("document lacks %q:\n%s", want, doc)
		}
	}
	if !strings.Contains(stdout.String(), "## Healthy subscriptions") {
		t.Errorf("no table on stdout:\n%s", stdout.String())
	}
}

func TestBench_RejectsUnknownScenarioAndBadNumbers(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--scenario", "nope"},
		{"bench", "--scenario=isolation", "--rate", "0"},
		{"bench", "--healthy-subs", "-1"},
		{"bench", "--before", "2"},
	} {
		var stdout, stderr bytes.Buffer
		if code := realMain(args, &stdout, &stderr); code != 1 {
			t.Errorf("%q: exit %d, want 1 (stderr %q)", args, code, stderr.String())
		}
	}
}
