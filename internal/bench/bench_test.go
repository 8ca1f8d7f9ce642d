package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/internal/cli"
)

// The benchmark itself is a command, not a test; this runs it with tiny
// numbers so `jetrelay bench` keeps working.
func TestBench_IsolationScenarioWritesItsDocument(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and an embedded JetStream twice")
	}
	out := filepath.Join(t.TempDir(), "docs", "isolation.md")
	args := []string{"--scenario", "isolation", "--healthy-subs", "2", "--rate", "40", "--duration", "1s",
		"--bad-deliveries", "30", "--slow-delay", "300ms", "--settle", "20s", "--out", out}
	var stdout, stderr bytes.Buffer
	if err := execute(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
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
		{"--scenario", "nope"},
		{"--scenario=isolation", "--rate", "0"},
		{"--healthy-subs", "-1"},
		{"--before", "2"},
		{"--scenario", "performance", "--only", "nope"},
		{"--scenario", "performance", "--rates", "0"},
		{"--scenario", "performance", "--fan-dead", "1"},
	} {
		var stdout, stderr bytes.Buffer
		if err := execute(t.Context(), args, &stdout, &stderr); err == nil {
			t.Errorf("%q: accepted, want an error (stderr %q)", args, stderr.String())
		}
	}
}

// The performance scenario with tiny numbers: every kind of case (the
// ceiling, the reference loop, jetrelay end to end, a fixed rate, a queue
// built before start, measured on a separate jetrelay process) still runs
// and lands in the document and the chart.
func TestBench_PerformanceScenarioWritesDocumentAndChart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and an embedded JetStream several times")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	args := []string{"--scenario", "performance", "--only", "ceiling,fast,reference-fast,rate,queued",
		"--deliveries", "200", "--ref-deliveries", "50", "--rates", "200", "--rate-for", "500ms", "--queued", "300",
		"--ceiling-for", "300ms", "--settle", "30s", "--relay-binary", buildRelay(t), "--out", out}
	var stdout, stderr bytes.Buffer
	if err := execute(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"go run ./cmd/jetrelay bench --scenario performance --only", // the command that reproduces it
		"| 2 | fast receiver | 200 / 200 |",                         // every delivery arrived
		"| 3 | reference loop, fast receiver | 50 / 50 |",
		"| 4 | fixed rate 200/s | 100 / 100 |",
		"| 5 | 300 queued before start | 300 / 300 |",
		"≥ 10× the sequential reference", "peak RSS with 300 deliveries queued",
		"![throughput of each case, log scale](BENCHMARKS.png)",
		"| engine |", // the profile attributes CPU to jetrelay's parts
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("document lacks %q:\n%s", want, doc)
		}
	}
	// The queued case's memory is the jetrelay process's, measured.
	if !regexp.MustCompile(`\| 5 \| 300 queued before start \| .* \| [1-9][0-9]* MiB \(jetrelay process\) \|\n`).Match(doc) {
		t.Errorf("the queued case's row gives no peak RSS of the jetrelay process:\n%s", doc)
	}
	if !strings.Contains(string(doc), "`jetrelay run` as a separate process") {
		t.Errorf("document does not say the queued case runs jetrelay as a separate process:\n%s", doc)
	}
	png, err := os.ReadFile(filepath.Join(dir, "BENCHMARKS.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("chart is not a PNG")
	}
}

// buildRelay builds the jetrelay binary a separate-process case runs: a
// test binary cannot stand in for it.
func buildRelay(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "jetrelay")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/jetrelay/jetrelay/cmd/jetrelay")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build jetrelay: %v\n%s", err, out)
	}
	return bin
}

// The limits scenario draws the chart of docs/operations.md and prints the
// limits at its turning points: the black hole is cut to 1, the fast
// endpoint ends holding the whole pool.
func TestBench_LimitsScenarioWritesTheChartAndTheTurningPoints(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "limits.png")
	var stdout, stderr bytes.Buffer
	if err := execute(t.Context(), []string{"--scenario", "limits", "--workers", "32", "--for", "20s", "--chart", chart}, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\| recovering \| black hole .* \| 1 \(1\) \| 1 \(1\) \|`),
		regexp.MustCompile(`\| fast \| 2 ms throughout \|.* 32 \(\d+\) \|\n`),
	} {
		if !want.Match(stdout.Bytes()) {
			t.Errorf("output lacks %s:\n%s", want, stdout.String())
		}
	}
	png, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("chart is not a PNG")
	}
}

// execute runs `jetrelay bench args...` as the binary does.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := cli.NewRoot("jetrelay")
	root.AddCommand(NewCommand("test", os.Getenv))
	root.SetArgs(append([]string{"bench"}, args...))
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}
