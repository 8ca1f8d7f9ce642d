package soak

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
)

var (
	seedFlag     = flag.Uint64("seed", 0, "soak seed (with -duration: one run of that seed)")
	durationFlag = flag.Duration("duration", 0, "fault phase of one soak run; 0 runs the short CI seeds")
	settleFlag   = flag.Duration("settle", 0, "settle deadline after the faults (default 90s)")
	reportFlag   = flag.String("report", "", "write the run's report as Markdown to this file (docs/reliability.md)")
	rateFlag     = flag.Float64("rate", 0, "events per second on the cluster keyspace (default 6)")
	dirFlag      = flag.String("dir", "", "keep the run's data and process logs in this directory")
	jetrelayFlag = flag.String("jetrelay", "", "soak this jetrelay binary instead of one built from this tree (e.g. a merge candidate or a release)")
)

// ciSeeds and ciDuration are the short soak the normal test suite runs.
var ciSeeds = []uint64{1, 2, 3}

const ciDuration = 20 * time.Second

// binaries are built once for every run of this test binary.
var binaries Binaries

func TestMain(m *testing.M) {
	flag.Parse()
	// Redis goes down on purpose; go-redis's pool warnings are noise here.
	store.RouteRedisLogs(slog.New(slog.DiscardHandler))
	dir, err := os.MkdirTemp("", "jetrelay-soak-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	binaries, err = Build(ctx, dir)
	cancel()
	if *jetrelayFlag != "" {
		binaries.Jetrelay = *jetrelayFlag
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestSoak runs the fault soak: by default a short run of each CI seed;
// with -duration one run of -seed, as `go tool task soak` does. Every
// violation names its check and delivery ids, and the seed reproduces it.
func TestSoak(t *testing.T) {
	if *durationFlag > 0 {
		soakOnce(t, *seedFlag, *durationFlag)
		return
	}
	for _, seed := range ciSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { soakOnce(t, seed, ciDuration) })
	}
}

func soakOnce(t *testing.T, seed uint64, d time.Duration) {
	dir := fromModuleRoot(t, *dirFlag)
	if dir == "" {
		dir = t.TempDir()
	} else {
		dir = fmt.Sprintf("%s/seed-%d", dir, seed)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Run(context.Background(), Config{
		Seed: seed, Duration: d, Settle: *settleFlag, Dir: dir, Binaries: binaries,
		EventsPerSecond: *rateFlag, Logf: t.Logf,
	})
	if rep != nil {
		t.Logf("soak report:\n%s", rep.Summary())
	}
	if err != nil {
		t.Fatalf("soak seed %d could not run: %v", seed, err)
	}
	if *reportFlag != "" {
		f, err := os.Create(fromModuleRoot(t, *reportFlag))
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteMarkdown(f, rep); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range rep.Violations {
		t.Errorf("seed %d: check %s failed %d times: %s (ids: %v); reproduce: go tool task soak -- --seed %d --duration %s",
			seed, v.Check, v.Count, v.Detail, v.IDs, seed, d)
	}
}

// fromModuleRoot resolves a relative path given to `go tool task soak`
// against the module root, where the task runs, not this package's
// directory, where go test runs the test.
func fromModuleRoot(t *testing.T, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, path)
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, path)
		}
	}
}
