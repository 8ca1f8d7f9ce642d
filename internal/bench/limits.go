package bench

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"os"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/internal/adaptive"
	"github.com/spf13/pflag"
)

// limitsOptions are the settings of the limits scenario.
type limitsOptions struct {
	workers int
	length  time.Duration
	chart   string
}

func limitsFlags(fs *pflag.FlagSet) benchRun {
	o := &limitsOptions{}
	fs.IntVar(&o.workers, "workers", 64, "workers of the simulated replica (JETRELAY_WORKERS)")
	fs.DurationVar(&o.length, "for", time.Minute, "simulated time")
	fs.StringVar(&o.chart, "chart", "", "write the chart of the limits over time (PNG) here (docs/img/limits.png)")
	return func(ctx context.Context, b *benchContext) (*benchReport, error) {
		if o.workers < 1 || o.workers > 4096 || o.length < 10*time.Second || o.length > time.Hour {
			return nil, errors.New("bench: --workers must be 1..4096 and --for 10s..1h")
		}
		return runLimits(b, o)
	}
}

// limitsEndpoint is one modeled endpoint of the limits scenario.
type limitsEndpoint struct {
	name, behaviour string
	colour          color.RGBA
	model           adaptive.Model
}

// limitsEndpoints: the slow one is healthy (8 requests at once, 10 ms
// each) until a third of the run, then serves one request at a time in
// 100 ms; the recovering one is a black hole (5 s timeouts) until half of
// the run, then healthy again; the fast one answers in 2 ms throughout.
func limitsEndpoints(length time.Duration) []limitsEndpoint {
	slowFrom, upFrom := (length / 3).Round(100*time.Millisecond), (length / 2).Round(100*time.Millisecond)
	return []limitsEndpoint{
		{"slow", fmt.Sprintf("10 ms with 8 requests served at once; from %s on, one request at a time in 100 ms", slowFrom),
			color.RGBA{0xd9, 0x48, 0x1c, 0xff}, func(at time.Duration, inflight int) (time.Duration, bool) {
				if at < slowFrom {
					return 10 * time.Millisecond * time.Duration((inflight+7)/8), false
				}
				return 100 * time.Millisecond * time.Duration(inflight), false
			}},
		{"recovering", fmt.Sprintf("black hole (5 s timeout) until %s, then 5 ms", upFrom),
			color.RGBA{0x2b, 0x6c, 0xb0, 0xff}, func(at time.Duration, _ int) (time.Duration, bool) {
				if at < upFrom {
					return 5 * time.Second, true
				}
				return 5 * time.Millisecond, false
			}},
		{"fast", "2 ms throughout", color.RGBA{0x2f, 0x9e, 0x44, 0xff}, func(time.Duration, int) (time.Duration, bool) {
			return 2 * time.Millisecond, false
		}},
	}
}

// runLimits runs the engine's limiter (internal/adaptive, with the
// engine's settings) against modeled endpoints on a virtual clock: every
// endpoint has an endless backlog, so the chart shows what the limits do,
// not what a loaded machine happened to measure. The engine tests show the
// same against real receivers.
func runLimits(b *benchContext, o *limitsOptions) (*benchReport, error) {
	eps := limitsEndpoints(o.length)
	models := make([]adaptive.Model, len(eps))
	for i, ep := range eps {
		models[i] = ep.model
	}
	b.stepf("simulating %s of %d workers sending to %d endpoints", o.length, o.workers, len(eps))
	const step = 100 * time.Millisecond
	series := adaptive.Simulate(adaptive.PoolConfig{Workers: o.workers, FastAnswer: 100 * time.Millisecond}, models, o.length, step)

	var t strings.Builder
	t.WriteString("| endpoint | behaviour |")
	marks := []time.Duration{0, o.length / 6, o.length/3 - step, o.length / 3, o.length/3 + 2*time.Second, o.length/2 - step, o.length/2 + time.Second, o.length/2 + 5*time.Second, o.length}
	for _, m := range marks {
		fmt.Fprintf(&t, " %s |", m.Round(100*time.Millisecond))
	}
	t.WriteString("\n|---|---|" + strings.Repeat("---|", len(marks)) + "\n")
	for i, ep := range eps {
		fmt.Fprintf(&t, "| %s | %s |", ep.name, ep.behaviour)
		for _, m := range marks {
			p := series[i][min(len(series[i])-1, int(m/step))]
			fmt.Fprintf(&t, " %d (%d) |", p.Limit, p.InFlight)
		}
		t.WriteString("\n")
	}
	summary := fmt.Sprintf("## Adaptive limits over time\n\nLimit (sends running) of each endpoint, %d workers:\n\n%s", o.workers, t.String())
	if o.chart != "" {
		png := limitsChart(eps, series, o.workers)
		if err := os.WriteFile(o.chart, png, 0o644); err != nil {
			return nil, err
		}
		summary += fmt.Sprintf("\nChart: %s (x: 0 to %s, a grid line every 10 s; y: 0 to %d workers, a grid line every 8; one line per endpoint: %s).\n",
			o.chart, o.length, o.workers, endpointColours(eps))
	}
	return &benchReport{title: "Adaptive per-subscription limits", summary: summary, doc: summary}, nil
}

func endpointColours(eps []limitsEndpoint) string {
	names := map[color.RGBA]string{{0xd9, 0x48, 0x1c, 0xff}: "orange", {0x2b, 0x6c, 0xb0, 0xff}: "blue", {0x2f, 0x9e, 0x44, 0xff}: "green"}
	parts := make([]string, len(eps))
	for i, ep := range eps {
		parts[i] = ep.name + " " + names[ep.colour]
	}
	return strings.Join(parts, ", ")
}

// limitsChart draws each endpoint's limit over time as a step line on a
// linear scale from 0 to the workers, without text (as throughputChart).
func limitsChart(eps []limitsEndpoint, series [][]adaptive.Point, workers int) []byte {
	const (
		width, height = 900, 320
		pad           = 10
	)
	img := newCanvas(width, height)
	n := len(series[0])
	last := series[0][n-1].At
	x := func(at time.Duration) int { return pad + int(float64(width-2*pad)*float64(at)/float64(last)) }
	y := func(v int) int { return height - pad - int(float64(height-2*pad)*float64(v)/float64(workers)) }
	for at := time.Duration(0); at <= last; at += 10 * time.Second {
		fill(img, image.Rect(x(at), pad, x(at)+1, height-pad), chartGrid)
	}
	for v := 0; v <= workers; v += 8 {
		fill(img, image.Rect(pad, y(v), width-pad, y(v)+1), chartGrid)
	}
	for i, ep := range eps {
		prev := y(series[i][0].Limit)
		for _, p := range series[i] {
			cur, at := y(p.Limit), x(p.At)
			// A 2-pixel step line: the vertical jump, then the level.
			fill(img, image.Rect(at, min(prev, cur), at+2, max(prev, cur)+2), ep.colour)
			fill(img, image.Rect(at, cur, x(p.At+100*time.Millisecond)+1, cur+2), ep.colour)
			prev = cur
		}
	}
	return pngBytes(img)
}
