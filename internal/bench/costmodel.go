package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"
)

// costOptions are the costmodel scenario's flags.
type costOptions struct {
	deliveries  int
	subs        int
	emitters    int
	eventBytes  int
	settle      time.Duration
	relayBinary string
	// rounds outside drains of each binary, alternating with the
	// baseline's when there is one: the figures are the median round's.
	rounds         int
	baselineBinary string
}

func costFlags(fs *pflag.FlagSet) benchRun {
	o := &costOptions{}
	fs.IntVar(&o.deliveries, "deliveries", 20000, "deliveries preloaded, then drained, in each of the two runs")
	fs.IntVar(&o.subs, "subs", 1, "subscriptions (one tenant each) the deliveries are spread over")
	fs.IntVar(&o.emitters, "emitters", 128, "concurrent admin writers preloading the backlog")
	fs.IntVar(&o.eventBytes, "event-bytes", 1024, "approximate size of each stored event (JSON)")
	fs.DurationVar(&o.settle, "settle", 3*time.Minute, "how long a drain may take")
	fs.StringVar(&o.relayBinary, "relay-binary", "", "jetrelay binary whose `run` the outside run starts as a separate process; default: this one")
	fs.IntVar(&o.rounds, "rounds", 3, "outside drains of each binary (the figures are the median round's: one drain's CPU moves by a fifth on a shared machine)")
	fs.StringVar(&o.baselineBinary, "baseline-binary", "", "a jetrelay binary to compare with (before a change): its outside drains alternate with this binary's, and both medians are reported")
	return func(ctx context.Context, b *benchContext) (*benchReport, error) {
		if o.deliveries < 100 || o.deliveries > 1_000_000 || o.subs < 1 || o.subs > 1000 || o.emitters < 1 || o.emitters > 256 ||
			o.eventBytes < 400 || o.eventBytes > 256<<10 || o.settle <= 0 || o.rounds < 1 || o.rounds > 25 {
			return nil, errors.New("costmodel: --deliveries 100..1000000, --subs 1..1000, --emitters 1..256, --event-bytes 400..262144, --settle > 0, --rounds 1..25")
		}
		return runCostModel(ctx, b, o)
	}
}

// outsideFigures are what anyone can check without a profiler: the
// `jetrelay run` process's and redis-server's CPU from /proc/<pid>/stat and
// Redis's command counts, over one drain of a preloaded backlog.
type outsideFigures struct {
	n                  int
	wall               time.Duration
	relayCPU, redisCPU time.Duration
	commands           map[string]int64 // command → calls during the drain, scripts' commands included
	// commandUsec is redis-server's own time inside each command during
	// the drain (INFO commandstats usec): a script's includes the commands
	// it ran, whose own figures count that time again.
	commandUsec map[string]int64
	// relaySys and redisSys are the read and write system calls of the
	// jetrelay process (from its start) and of redis-server (the window).
	relaySys, redisSys sysCalls
	// netIn and netOut are the bytes redis-server read from its clients
	// and wrote to them in the window (INFO stats total_net_input_bytes,
	// total_net_output_bytes), -1 when it does not say.
	netIn, netOut int64
}

// profiledDrain is the same drain with jetrelay in this process, profiled.
type profiledDrain struct {
	n       int
	wall    time.Duration
	cpu     time.Duration // this process's CPU, the receivers' included
	heap    heapCounts    // allocated and GC cycles in this process, the receivers' included
	profile *profileSummary
	floors  map[string]floor // step → the step alone
}

func runCostModel(ctx context.Context, b *benchContext, o *costOptions) (*benchReport, error) {
	bin, err := relayBinary(o.relayBinary)
	if err != nil {
		return nil, err
	}
	var this, before outsideRounds
	for range o.rounds {
		if o.baselineBinary != "" {
			r, err := outsideDrain(ctx, b, o, o.baselineBinary)
			if err != nil {
				return nil, fmt.Errorf("outside run of the baseline: %w", err)
			}
			before = append(before, r)
		}
		r, err := outsideDrain(ctx, b, o, bin)
		if err != nil {
			return nil, fmt.Errorf("outside run: %w", err)
		}
		this = append(this, r)
	}
	in, err := profileDrain(ctx, b, o)
	if err != nil {
		return nil, fmt.Errorf("profiled run: %w", err)
	}
	return costReport(o, this, before, in), nil
}

// outsideRounds are the outside drains of one binary.
type outsideRounds []*outsideFigures

// median is the round whose CPU per delivery (both processes) is the
// median's.
func (rs outsideRounds) median() *outsideFigures {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b *outsideFigures) int { return cmp.Compare(a.perDelivery(), b.perDelivery()) })
	return sorted[len(sorted)/2]
}

// String lists every round's CPU per delivery, in the order they ran.
func (rs outsideRounds) String() string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.0f + %.0f", perDelivery(r.relayCPU, r.n), perDelivery(r.redisCPU, r.n))
	}
	return strings.Join(parts, ", ") + " µs"
}

// perDelivery is both processes' CPU per delivery, in µs.
func (o *outsideFigures) perDelivery() float64 { return perDelivery(o.relayCPU+o.redisCPU, o.n) }

// costEnv starts a fresh Redis and JetStream, the subscriptions and their
// receiver, and preloads the backlog; jetrelay is built but not started.
func costEnv(ctx context.Context, b *benchContext, o *costOptions, child string) (*benchEnv, *fleet, *emitted, error) {
	env, err := startBenchEnv(ctx, b, envOptions{encrypt: true, held: true, child: child})
	if err != nil {
		return nil, nil, nil, err
	}
	p := &perfRun{b: b, o: &perfOptions{}}
	f, err := p.newFleet(ctx, env, layout{tenants: o.subs, subsPerTenant: 1}, 0)
	if err != nil {
		env.close()
		return nil, nil, nil, err
	}
	spec := emission{tenants: f.tenants, eventType: healthyEventType, events: o.deliveries, workers: o.emitters, data: eventData(o.eventBytes)}
	load := newEmitted()
	if err := emit(ctx, env.admin, spec, load); err != nil {
		env.close()
		return nil, nil, nil, err
	}
	return env, f, load, nil
}

// awaitDrained waits until the receiver has accepted n deliveries.
func awaitDrained(ctx context.Context, env *benchEnv, f *fleet, n int, settle time.Duration) error {
	deadline := time.Now().Add(settle)
	for f.sink.accepted() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d delivered within %s", f.sink.accepted(), n, settle)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-env.childExited():
			return env.child.exitError()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

func outsideDrain(ctx context.Context, b *benchContext, o *costOptions, bin string) (*outsideFigures, error) {
	b.stepf("outside figures: %d deliveries preloaded, drained by `%s run` in its own process", o.deliveries, bin)
	env, f, _, err := costEnv(ctx, b, o, bin)
	if err != nil {
		return nil, err
	}
	defer env.close()
	redisPID, err := redisPID(ctx, env.adminDB)
	if err != nil {
		return nil, err
	}
	c0, u0, err := commandTimes(ctx, env.adminDB)
	if err != nil {
		return nil, err
	}
	r0, err := procCPU(redisPID)
	if err != nil {
		return nil, err
	}
	s0, err := procSyscalls(redisPID)
	if err != nil {
		return nil, err
	}
	in0, out0 := env.redisStat(ctx, "total_net_input_bytes"), env.redisStat(ctx, "total_net_output_bytes")
	t0 := time.Now()
	if err := env.start(ctx); err != nil {
		return nil, err
	}
	if err := awaitDrained(ctx, env, f, o.deliveries, o.settle); err != nil {
		return nil, err
	}
	wall := time.Since(t0)
	// The receiver's answer precedes each outcome write: let the last
	// writes land (the command counts stop moving) before reading.
	if _, err := settledCommandStats(ctx, env.adminDB); err != nil {
		return nil, err
	}
	c1, u1, err := commandTimes(ctx, env.adminDB)
	if err != nil {
		return nil, err
	}
	ru, err := env.child.usage()
	if err != nil {
		return nil, err
	}
	relaySys, err := procSyscalls(env.child.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	r1, err := procCPU(redisPID)
	if err != nil {
		return nil, err
	}
	s1, err := procSyscalls(redisPID)
	if err != nil {
		return nil, err
	}
	out := &outsideFigures{n: o.deliveries, wall: wall, relayCPU: ru.cpu, redisCPU: r1 - r0,
		commands: map[string]int64{}, commandUsec: map[string]int64{}, relaySys: relaySys, redisSys: s1.sub(s0), netIn: -1, netOut: -1}
	if in1, out1 := env.redisStat(ctx, "total_net_input_bytes"), env.redisStat(ctx, "total_net_output_bytes"); in0 >= 0 && out0 >= 0 && in1 >= 0 && out1 >= 0 {
		out.netIn, out.netOut = in1-in0, out1-out0
	}
	for k, v := range c1 {
		if d := v - c0[k]; d > 0 && k != "info" {
			out.commands[k] = d
			out.commandUsec[k] = u1[k] - u0[k]
		}
	}
	b.stepf("  %d deliveries in %s: jetrelay run %.0f µs + redis-server %.0f µs of CPU per delivery, %.2f Redis commands per delivery",
		out.n, out.wall.Round(time.Millisecond), perDelivery(out.relayCPU, out.n), perDelivery(out.redisCPU, out.n), out.commandsPer())
	return out, nil
}

func profileDrain(ctx context.Context, b *benchContext, o *costOptions) (*profiledDrain, error) {
	b.stepf("cost per step: %d deliveries preloaded, drained by jetrelay in this process under a CPU profile", o.deliveries)
	env, f, load, err := costEnv(ctx, b, o, "")
	if err != nil {
		return nil, err
	}
	defer env.close()
	freshMemory()
	prof := startCaseProfile()
	u0, h0 := resourcesNow(), heapNow()
	if err := env.start(ctx); err != nil {
		prof.stopBy(costStepOf)
		return nil, err
	}
	err = awaitDrained(ctx, env, f, o.deliveries, o.settle)
	u1, h1 := resourcesNow(), heapNow()
	summary := prof.stopBy(costStepOf)
	if err != nil {
		return nil, err
	}
	b.keepProfile("cost model drain", prof)
	if summary == nil {
		return nil, errors.New("no CPU profile (is --cpuprofile set? the cost model profiles the drain itself)")
	}
	in := &profiledDrain{n: o.deliveries, wall: u1.at.Sub(u0.at), cpu: u1.cpu - u0.cpu, heap: h1.sub(h0), profile: summary}
	b.stepf("  %d deliveries in %s, %.0f µs of this process's CPU per delivery (receivers included), %s",
		in.n, in.wall.Round(time.Millisecond), perDelivery(in.cpu, in.n), in.allocated())
	// The engine is idle now: the floors are measured on the same
	// servers and records.
	if in.floors, err = measureFloors(ctx, b, env, f, load); err != nil {
		return nil, fmt.Errorf("floors: %w", err)
	}
	return in, nil
}

// allocated says what the drain allocated per delivery and how many GC
// cycles that took.
func (in *profiledDrain) allocated() string {
	n := float64(max(in.n, 1))
	return fmt.Sprintf("%.1f KiB in %.0f objects allocated per delivery, %d GC cycles",
		float64(in.heap.bytes)/1024/n, float64(in.heap.objects)/n, in.heap.cycles)
}

func (o *outsideFigures) commandsPer() float64 {
	var total int64
	for _, v := range o.commands {
		total += v
	}
	return float64(total) / float64(max(o.n, 1))
}

// settledCommandStats polls INFO commandstats until fewer than a handful
// of commands (background heartbeats) ran in 300 ms, at most 10 s.
func settledCommandStats(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	prev, err := commandStats(ctx, rdb)
	if err != nil {
		return nil, err
	}
	for range 33 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		cur, err := commandStats(ctx, rdb)
		if err != nil {
			return nil, err
		}
		var moved int64
		for k, v := range cur {
			if k != "info" {
				moved += v - prev[k]
			}
		}
		if moved < 10 {
			return cur, nil
		}
		prev = cur
	}
	return prev, nil
}

// redisPID is redis-server's process id, as it reports it.
func redisPID(ctx context.Context, rdb *redis.Client) (int, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server reported no process_id")
}

// commandStats is INFO commandstats as command → calls. Redis counts a
// command a script runs under that command too (and the script under
// evalsha), so the sum is every command executed.
func commandStats(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	calls, _, err := commandTimes(ctx, rdb)
	return calls, err
}

// commandTimes reads INFO commandstats: each command's calls, and the
// microseconds redis-server spent inside it (usec).
func commandTimes(ctx context.Context, rdb *redis.Client) (calls, usec map[string]int64, err error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, nil, err
	}
	calls, usec = map[string]int64{}, map[string]int64{}
	for line := range strings.SplitSeq(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			if k != "calls" && k != "usec" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("INFO commandstats: %q: %w", line, err)
			}
			if k == "calls" {
				calls[name] = n
			} else {
				usec[name] = n
			}
		}
		if _, ok := calls[name]; !ok {
			return nil, nil, fmt.Errorf("INFO commandstats: %q: no calls", line)
		}
	}
	return calls, usec, nil
}

// sysCalls counts a process's read and write system calls.
type sysCalls struct{ reads, writes int64 }

func (s sysCalls) sub(o sysCalls) sysCalls { return sysCalls{s.reads - o.reads, s.writes - o.writes} }

// procSyscalls reads /proc/<pid>/io's syscr and syscw: the read(2),
// pread, readv and the write(2), pwrite, writev calls the process made,
// those on sockets included (Go's and redis-server's socket I/O goes
// through read and write).
func procSyscalls(pid int) (sysCalls, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/io"
	var s sysCalls
	for _, f := range []struct {
		name string
		to   *int64
	}{{"syscr", &s.reads}, {"syscw", &s.writes}} {
		v, err := procField(path, f.name)
		if err != nil {
			return sysCalls{}, err
		}
		if *f.to, err = strconv.ParseInt(v, 10, 64); err != nil {
			return sysCalls{}, fmt.Errorf("%s: %s: %w", path, f.name, err)
		}
	}
	return s, nil
}

// procCPU is a process's user + system CPU time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return statCPU(string(raw))
}
