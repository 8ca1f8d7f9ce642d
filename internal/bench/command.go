package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jetrelay/jetrelay/internal/cli"
)

// benchScenario is one workload of `jetrelay bench`. Each scenario owns its
// flags, so adding one (a fast receiver, many subscriptions, a fixed rate
// against a replica set) is a new file and one entry in benchScenarios.
type benchScenario struct {
	name  string
	about string
	// flags registers the scenario's settings on fs and returns the function
	// that runs it once they are parsed.
	flags func(fs *pflag.FlagSet) benchRun
}

// benchRun runs a scenario and reports what it measured.
type benchRun func(ctx context.Context, b *benchContext) (*benchReport, error)

// benchScenarios lists every scenario, the first being the default.
var benchScenarios = []benchScenario{
	{name: "isolation", about: "dead, black-hole and slow endpoints with tens of thousands of queued deliveries next to healthy subscriptions", flags: isolationFlags},
	{name: "performance", about: "throughput, latency, CPU and memory against the POST ceiling and the reference service's sequential loop (docs/BENCHMARKS.md)", flags: perfFlags},
	{name: "costmodel", about: "CPU per delivery by step (bridge, JetStream, Redis, JSON, signing, POST, outcome write, put-offs), plus the process + redis-server CPU and Redis commands per delivery measured from outside", flags: costFlags},
	{name: "ordering", about: "what ordered delivery costs: one ordered subscription with a fast receiver, unordered subscriptions beside busy ordered lines, and Redis commands per delivery with ordering off (docs/ordering.md's Cost section)", flags: orderingFlags},
	{name: "backlog", about: "a healthy subscription draining its preloaded backlog alone, then beside an equal interleaved backlog for a black hole and for an endpoint answering 503 (docs/isolation.md's section \"Isolation under a backlog\")", flags: backlogFlags},
	{name: "limits", about: "the adaptive per-subscription limits over time, for a slow, a recovering and a fast endpoint, simulated (docs/operations.md's chart)", flags: limitsFlags},
}

// benchContext is what every scenario is given: where to say what it is
// doing, and the logger jetrelay's own logs go to when asked for.
type benchContext struct {
	progress io.Writer // one line per step, for the person watching
	verbose  io.Writer // jetrelay's logs with -v, otherwise io.Discard
	getenv   func(string) string
	out      string // --out, "" if none: where files a scenario writes go next to
	version  string // jetrelay's version, for the stacks a scenario starts
	profiles string // --profiles, "" if none: where each case's CPU profile is kept
	kept     int    // case profiles kept so far, to number the files
}

func (b *benchContext) stepf(format string, args ...any) {
	fmt.Fprintf(b.progress, "● "+format+"\n", args...)
}

// benchReport is a scenario's result: a Markdown summary for the terminal
// and, for --out, the body of a document.
type benchReport struct {
	title   string
	summary string            // Markdown printed at the end of the run
	doc     string            // Markdown sections of the written document, after the machine and the command
	files   map[string][]byte // further files written with --out (e.g. a chart), by path
	load    [2]string         // the machine's load average at the start and the end of the run
	// use is what else the machine did during the run (useKnown: it could
	// be measured): whether its figures come from a quiet machine.
	use      machineUse
	useKnown bool
	// section, if set, makes doc one "## section" of the document at
	// --out (written into it, the rest kept) rather than a document.
	section string
}

// NewCommand is `jetrelay bench`: a scenario run end to end on this
// machine, everything on loopback, nothing left behind. version labels the
// jetrelay stacks it starts; getenv is the environment its tuning
// variables come from.
//
// Each scenario owns its flags, so the command parses them itself once
// --scenario has said which scenario runs.
func NewCommand(version string, getenv func(string) string) *cobra.Command {
	cmd := &cobra.Command{
		Use:                "bench --scenario NAME [flags]",
		Short:              "benchmark a scenario on this machine (e.g. --scenario isolation --out docs/isolation.md)",
		DisableFlagParsing: true,
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return run(cmd, args, version, getenv)
	}
	return cmd
}

func run(cmd *cobra.Command, args []string, version string, getenv func(string) string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	sc, err := scenarioNamed(scenarioArg(args))
	if err != nil {
		return cli.Usagef("%w", err)
	}
	var about strings.Builder
	fmt.Fprintf(&about, "Benchmark a scenario on this machine. Scenarios:\n\n")
	for _, s := range benchScenarios {
		fmt.Fprintf(&about, "  %-12s %s\n", s.name, s.about)
	}
	fmt.Fprintf(&about, "\nFlags of scenario %q (name a scenario with --help for its flags); the JETRELAY_* tuning variables of 'jetrelay run' apply too.", sc.name)
	cmd.Long = about.String()
	fs := cmd.Flags()
	fs.String("scenario", benchScenarios[0].name, "scenario to run: "+scenarioNames())
	out := fs.String("out", "", "also write the result, the machine and the command to this Markdown file (e.g. docs/isolation.md)")
	timeout := fs.Duration("timeout", 15*time.Minute, "give up after this long")
	verbose := fs.BoolP("verbose", "v", false, "show jetrelay's own logs (info and above)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	memProfile := fs.String("memprofile", "", "write the whole run's allocations (a heap profile; read it with go tool pprof -sample_index=alloc_space or alloc_objects) to this file when it ends")
	profiles := fs.String("profiles", "", "also keep the CPU profile of every case the report profiles in this directory, one file per case numbered in the order they ran (go tool pprof; not with --cpuprofile, which leaves the cases unprofiled)")
	scenario := sc.flags(fs)
	if err := fs.Parse(args); err != nil {
		return cli.Usagef("%w", err)
	}
	if help, _ := fs.GetBool("help"); help {
		return cmd.Help()
	}
	if fs.NArg() > 0 {
		return cli.Usagef("bench: unexpected arguments %q", fs.Args())
	}
	if *profiles != "" && *cpuProfile != "" {
		return cli.Usagef("bench: --profiles and --cpuprofile exclude each other: while the whole run is profiled, no case can be")
	}
	if *profiles != "" {
		if err := os.MkdirAll(*profiles, 0o755); err != nil {
			return err
		}
	}
	ctx := cmd.Context()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	b := &benchContext{progress: stdout, verbose: io.Discard, getenv: getenv, out: *out, version: version, profiles: *profiles}
	if *verbose {
		b.verbose = stderr
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	started, loadBefore, before := time.Now(), loadAverage(), sampleMachine()
	rep, err := scenario(ctx, b)
	if err != nil {
		return err
	}
	if *memProfile != "" {
		if err := writeAllocProfile(*memProfile); err != nil {
			return err
		}
	}
	rep.load = [2]string{loadBefore, loadAverage()}
	rep.use, rep.useKnown = useBetween(before, sampleMachine(), runtime.NumCPU())
	fmt.Fprintf(stdout, "\n%s\n", rep.summary)
	if *out == "" {
		return nil
	}
	command := "go run ./cmd/jetrelay bench " + strings.Join(args, " ")
	doc, err := documentAt(*out, rep, command, started)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	for _, path := range slices.Sorted(maps.Keys(rep.files)) {
		if err := os.WriteFile(path, rep.files[path], 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", path)
	}
	return nil
}

// scenarioArg finds --scenario among args before they are parsed, because
// the scenario decides which other flags exist.
func scenarioArg(args []string) string {
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "scenario" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return benchScenarios[0].name
}

func scenarioNamed(name string) (benchScenario, error) {
	i := slices.IndexFunc(benchScenarios, func(s benchScenario) bool { return s.name == name })
	if i < 0 {
		return benchScenario{}, fmt.Errorf("bench: unknown scenario %q (have %s)", name, scenarioNames())
	}
	return benchScenarios[i], nil
}

func scenarioNames() string {
	names := make([]string, len(benchScenarios))
	for i, s := range benchScenarios {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// machine describes where a benchmark ran, read at run time.
type machine struct {
	cpus     int
	cpuModel string
	memory   string
	goVer    string
	platform string
}

func machineOf() machine {
	m := machine{cpus: runtime.NumCPU(), goVer: runtime.Version(), platform: runtime.GOOS + "/" + runtime.GOARCH, cpuModel: "unknown", memory: "unknown"}
	if v, err := procField("/proc/cpuinfo", "model name"); err == nil {
		m.cpuModel = v
	}
	if v, err := procField("/proc/meminfo", "MemTotal"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(v, "%d kB", &kb); err == nil {
			m.memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return m
}

// loadAverage is the first three fields of /proc/loadavg, "" where there
// is none: a busy machine skews every number, so the document says how busy.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// procField returns the value of the first "name: value" line of a /proc file.
func procField(path, name string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New(name + " not found in " + path)
}

// documentAt is what --out's file becomes: the report's document, keeping
// the sections other scenarios wrote there, or, for a section report, the
// file as it is with that section written in.
func documentAt(path string, rep *benchReport, command string, at time.Time) (string, error) {
	if rep.section == "" {
		return keepSections(path, benchDocument(rep, machineOf(), command, at))
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return withSection(string(old), rep.section, sectionDocument(rep, machineOf(), command, at)), nil
}

// sectionDocument is a section report under its heading, with the machine
// and the command it ran with.
func sectionDocument(rep *benchReport, m machine, command string, at time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", rep.section)
	fmt.Fprintf(&b, "Generated by `jetrelay bench` on %s with\n\n```sh\n%s\n```\n\n", at.UTC().Format("2006-01-02"), command)
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s memory, %s, %s.", m.cpus, m.cpuModel, m.memory, m.goVer, m.platform)
	if rep.load[0] != "" {
		fmt.Fprintf(&b, " Load average (1, 5, 15 min) when the run started: %s; when it ended: %s (the run's own work included).", rep.load[0], rep.load[1])
	}
	if rep.useKnown {
		b.WriteString(" " + rep.use.sentence())
	}
	b.WriteString("\n\n")
	b.WriteString(rep.doc)
	return b.String()
}

func benchDocument(rep *benchReport, m machine, command string, at time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", rep.title)
	fmt.Fprintf(&b, "Generated by `jetrelay bench` on %s. Reproduce with\n\n", at.UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "```sh\n%s\n```\n\n", command)
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s memory, %s, %s. Everything — redis-server, the embedded\n", m.cpus, m.cpuModel, m.memory, m.goVer, m.platform)
	fmt.Fprintf(&b, "JetStream, jetrelay, the receivers and the load generator — runs on this one machine, on loopback.\n")
	if rep.load[0] != "" {
		fmt.Fprintf(&b, "Load average (1, 5, 15 min) when the run started: %s; when it ended: %s (the run's own work included).\n", rep.load[0], rep.load[1])
	}
	if rep.useKnown {
		b.WriteString(rep.use.sentence() + "\n")
	}
	b.WriteString("\n")
	b.WriteString(rep.doc)
	return b.String()
}
