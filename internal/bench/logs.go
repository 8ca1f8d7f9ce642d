package bench

import (
	"context"
	"io"
	"log/slog"
	"sync"
)

// logCounter counts jetrelay's structured log records by subscription,
// message and reason. The engine keeps no counters of its own, and its logs
// are the one place that says why a delivery was put off, so the bench
// reads them instead of changing the engine. Records at info and above are
// also formatted as jetrelay's own text lines and written to the verbose
// writer (io.Discard without -v): an in-process jetrelay pays for its log
// lines as a real one does, and the cost model counts them.
type logCounter struct {
	mu     sync.Mutex
	counts map[logKey]int
	echo   slog.Handler
}

// logKey identifies a kind of log record; sub is "" for records that name no
// subscription.
type logKey struct{ sub, msg, reason string }

func newLogCounter(verbose io.Writer) *logCounter {
	return &logCounter{counts: make(map[logKey]int), echo: slog.NewTextHandler(verbose, &slog.HandlerOptions{Level: slog.LevelInfo})}
}

func (lc *logCounter) logger() *slog.Logger { return slog.New(&countingHandler{lc: lc, echo: lc.echo}) }

// count returns how many records of sub with msg (and reason, unless "")
// were logged.
func (lc *logCounter) count(sub, msg, reason string) int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	n := 0
	for k, c := range lc.counts {
		if k.sub == sub && k.msg == msg && (reason == "" || k.reason == reason) {
			n += c
		}
	}
	return n
}

// total returns how many records with msg were logged, whatever their
// subscription and reason.
func (lc *logCounter) total(msg string) int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	n := 0
	for k, c := range lc.counts {
		if k.msg == msg {
			n += c
		}
	}
	return n
}

// reasons returns the reasons logged with msg for sub and how often.
func (lc *logCounter) reasons(sub, msg string) map[string]int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	out := map[string]int{}
	for k, c := range lc.counts {
		if k.sub == sub && k.msg == msg {
			out[k.reason] += c
		}
	}
	return out
}

// warnings returns every warning or error message logged without a
// subscription, with its count.
func (lc *logCounter) warnings() map[string]int {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	out := map[string]int{}
	for k, c := range lc.counts {
		if k.reason == "warn+" {
			out[k.msg] += c
		}
	}
	return out
}

// countingHandler is the slog.Handler behind logCounter.logger. It keeps
// only the two attributes it counts by.
type countingHandler struct {
	lc          *logCounter
	echo        slog.Handler
	sub, reason string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	k := logKey{sub: h.sub, msg: r.Message, reason: h.reason}
	r.Attrs(func(a slog.Attr) bool {
		k = h.note(k, a)
		return true
	})
	if k.sub == "" && r.Level >= slog.LevelWarn {
		k.reason = "warn+"
	}
	h.lc.mu.Lock()
	h.lc.counts[k]++
	h.lc.mu.Unlock()
	if h.echo.Enabled(ctx, r.Level) {
		return h.echo.Handle(ctx, r)
	}
	return nil
}

func (h *countingHandler) note(k logKey, a slog.Attr) logKey {
	switch a.Key {
	case "subscription_id":
		k.sub = a.Value.String()
	case "reason":
		k.reason = a.Value.String()
	}
	return k
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	k := logKey{sub: h.sub, reason: h.reason}
	for _, a := range as {
		k = h.note(k, a)
	}
	c.sub, c.reason = k.sub, k.reason
	c.echo = h.echo.WithAttrs(as)
	return &c
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.echo = h.echo.WithGroup(name)
	return &c
}
