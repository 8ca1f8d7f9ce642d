package bench

import (
	"bytes"
	"compress/gzip"
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
	"unicode"

	"google.golang.org/protobuf/encoding/protowire"
)

// cpuProfile records a CPU profile of one benchmark case, so the document
// can say where the time went without anyone running go tool pprof. If a
// profile is already running (--cpuprofile), the case is not profiled.
type cpuProfile struct {
	buf bytes.Buffer
	on  bool
}

func startCaseProfile() *cpuProfile {
	p := &cpuProfile{}
	p.on = pprof.StartCPUProfile(&p.buf) == nil
	return p
}

// keepProfile writes p, stopped, into --profiles as NN-name.pprof, NN
// counting the cases kept so far; without --profiles, or with no profile,
// it does nothing. A profile that cannot be written is reported, not fatal:
// the case's figures stand without it.
func (b *benchContext) keepProfile(name string, p *cpuProfile) {
	if b.profiles == "" || p == nil || !p.on {
		return
	}
	b.kept++
	path := filepath.Join(b.profiles, fmt.Sprintf("%02d-%s.pprof", b.kept, fileSlug(name)))
	if err := os.WriteFile(path, p.buf.Bytes(), 0o644); err != nil {
		b.stepf("  CPU profile of %q not kept: %v", name, err)
		return
	}
	b.stepf("  CPU profile of %q kept in %s", name, path)
}

// fileSlug is name in lower case with every run of other characters than
// letters and digits made one hyphen: "fixed rate 1000/s" → "fixed-rate-1000-s".
func fileSlug(name string) string {
	var out strings.Builder
	hyphen := false
	for _, r := range strings.ToLower(name) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			out.WriteRune(r)
			hyphen = false
		} else if !hyphen && out.Len() > 0 {
			out.WriteByte('-')
			hyphen = true
		}
	}
	return strings.TrimSuffix(out.String(), "-")
}

// stop ends the profile and summarises it by component; nil if there was
// none.
func (p *cpuProfile) stop() *profileSummary { return p.stopBy(componentOf) }

// stopBy ends the profile and summarises it with the samples attributed by
// classify; nil if there was none.
func (p *cpuProfile) stopBy(classify func(stack []string) string) *profileSummary {
	if !p.on {
		return nil
	}
	pprof.StopCPUProfile()
	s, err := summarizeProfileBy(p.buf.Bytes(), classify)
	if err != nil {
		return nil
	}
	return s
}

// profileSummary is a CPU profile reduced to what a reader of the
// benchmark document needs: the share of CPU samples by component, and the
// functions that burn the most CPU themselves.
type profileSummary struct {
	samples    int64
	components map[string]int64 // component → samples
	flat       map[string]int64 // leaf function → samples
}

// components attributes a stack to the first of these found in it, so a
// stack in which the engine calls go-redis is the engine's. The order puts
// the more specific owners first.
var profileComponents = []struct{ name, marker string }{
	{"load generator (admin writes)", "jetrelay/jetrelay/internal/bench.emit"},
	{"sequential reference loop", "jetrelay/jetrelay/internal/bench.runReferenceLoop"},
	{"ceiling POST loop", "jetrelay/jetrelay/internal/bench.ceilingWorker"},
	{"engine", "jetrelay/jetrelay/engine."},
	{"bridge", "jetrelay/jetrelay/bridge."},
	{"receivers (HTTP server side)", "net/http.(*conn).serve"},
	{"HTTP client connection loops", "net/http.(*persistConn)"},
	{"embedded NATS server", "nats-server/v2/server."},
	{"NATS client", "nats-io/nats.go"},
	{"go-redis connections", "redis/go-redis"},
	{"Go GC", "runtime.gcBgMarkWorker"},
	{"Go scheduler / netpoll / syscalls", "runtime."},
}

// summarizeProfileBy decodes a gzipped pprof profile (the protobuf
// perftools.profiles.Profile, read field by field) into a profileSummary,
// the samples attributed by classify (componentOf, or the cost model's
// steps), which is given each sample's stack, innermost function first.
func summarizeProfileBy(gz []byte, classify func(stack []string) string) (*profileSummary, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	type sample struct {
		locs  []uint64
		value int64 // the first value: sample count
	}
	var (
		samples   []sample
		strs      []string
		funcName  = map[uint64]int64{}    // function id → string index
		locFuncs  = map[uint64][]uint64{} // location id → function ids, innermost first
		parseErrs error
	)
	eachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
		switch num {
		case 2: // sample
			var s sample
			eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
				switch {
				case num == 1 && typ == protowire.BytesType:
					s.locs = appendPacked(s.locs, v)
				case num == 1:
					s.locs = append(s.locs, n)
				case num == 2 && typ == protowire.BytesType && s.value == 0:
					if vals := appendPacked(nil, v); len(vals) > 0 {
						s.value = int64(vals[0])
					}
				case num == 2 && s.value == 0:
					s.value = int64(n)
				}
			}, &parseErrs)
			samples = append(samples, s)
		case 4: // location
			var id uint64
			var fns []uint64
			eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
				switch num {
				case 1:
					id = n
				case 4: // line
					eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) {
						if num == 1 {
							fns = append(fns, n)
						}
					}, &parseErrs)
				}
			}, &parseErrs)
			locFuncs[id] = fns
		case 5: // function
			var id uint64
			var name int64
			eachField(v, func(num protowire.Number, _ protowire.Type, _ []byte, n uint64) {
				switch num {
				case 1:
					id = n
				case 2:
					name = int64(n)
				}
			}, &parseErrs)
			funcName[id] = name
		case 6: // string_table
			strs = append(strs, string(v))
		}
	}, &parseErrs)
	if parseErrs != nil {
		return nil, parseErrs
	}
	name := func(fn uint64) string {
		if i := funcName[fn]; i >= 0 && int(i) < len(strs) {
			return strs[i]
		}
		return "?"
	}
	ps := &profileSummary{components: map[string]int64{}, flat: map[string]int64{}}
	for _, s := range samples {
		ps.samples += s.value
		var names []string
		for _, l := range s.locs {
			for _, fn := range locFuncs[l] {
				names = append(names, name(fn))
			}
		}
		if len(names) > 0 {
			ps.flat[names[0]] += s.value
		}
		ps.components[classify(names)] += s.value
	}
	return ps, nil
}

func componentOf(stack []string) string {
	for _, c := range profileComponents {
		for _, fn := range stack {
			if strings.Contains(fn, c.marker) {
				return c.name
			}
		}
	}
	return "other"
}

// eachField calls fn for every top-level field of a protobuf message: v is
// the payload of a length-delimited field, n the value of a varint or fixed
// one. The first malformed field ends the walk and is reported through err.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, n uint64), err *error) {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			*err = errors.Join(*err, protowire.ParseError(l))
			return
		}
		b = b[l:]
		switch typ {
		case protowire.VarintType:
			n, l := protowire.ConsumeVarint(b)
			if l < 0 {
				*err = errors.Join(*err, protowire.ParseError(l))
				return
			}
			fn(num, typ, nil, n)
			b = b[l:]
		case protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				*err = errors.Join(*err, protowire.ParseError(l))
				return
			}
			fn(num, typ, v, 0)
			b = b[l:]
		default:
			l := protowire.ConsumeFieldValue(num, typ, b)
			if l < 0 {
				*err = errors.Join(*err, protowire.ParseError(l))
				return
			}
			b = b[l:]
		}
	}
}

func appendPacked(out []uint64, b []byte) []uint64 {
	for len(b) > 0 {
		n, l := protowire.ConsumeVarint(b)
		if l < 0 {
			return out
		}
		out = append(out, n)
		b = b[l:]
	}
	return out
}

// table renders the summary as Markdown: components, then the top leaf
// functions.
func (ps *profileSummary) table(top int) string {
	if ps == nil || ps.samples == 0 {
		return "(no profile)\n"
	}
	var b strings.Builder
	b.WriteString("| where the process's CPU went | share of samples |\n|---|---:|\n")
	for _, k := range sortedByCount(ps.components) {
		fmt.Fprintf(&b, "| %s | %.1f %% |\n", k, 100*float64(ps.components[k])/float64(ps.samples))
	}
	b.WriteString("\n| hottest functions (self time) | share |\n|---|---:|\n")
	for i, k := range sortedByCount(ps.flat) {
		if i == top {
			break
		}
		fmt.Fprintf(&b, "| `%s` | %.1f %% |\n", k, 100*float64(ps.flat[k])/float64(ps.samples))
	}
	return b.String()
}

// share is the fraction of samples attributed to component name.
func (ps *profileSummary) share(name string) float64 {
	if ps == nil || ps.samples == 0 {
		return 0
	}
	return float64(ps.components[name]) / float64(ps.samples)
}

func sortedByCount(m map[string]int64) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return int(m[b] - m[a])
		}
		return strings.Compare(a, b)
	})
	return keys
}

// writeAllocProfile writes the heap profile to path after a GC, so that its
// allocation counts (alloc_space, alloc_objects) cover everything the run
// allocated up to now.
func writeAllocProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("bench: writing the allocation profile: %w", err)
	}
	return f.Close()
}
