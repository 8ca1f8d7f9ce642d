package engine

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// A line's source (HandlerOptions.AddSource) is the code that wrote it, as
// with slog.Logger's own methods, not the handling's logger.
func TestHandlingLog_SourceIsTheCaller(t *testing.T) {
	var out bytes.Buffer
	l := newHandlingLog(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{AddSource: true})), "del_1")
	l.withAttempt(2)
	l.Warn("w")
	l.logger().Warn("derived")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	for _, line := range lines {
		if !strings.Contains(line, "handlinglog_test.go:") || !strings.Contains(line, "delivery_id=del_1 attempt=2") {
			t.Errorf("line without this file as its source or without the handling's fields: %s", line)
		}
	}
}

// The fields of one successful delivery and its "delivered" line, as a
// handling gathers and writes them, against deriving a logger per field
// (slog.Logger.With), which the engine did before.
func BenchmarkHandlingLog(b *testing.B) {
	base := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.Run("fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			logDelivered(b, base)
		}
	})
	// The same line written where jetrelay run writes it, a pipe to a log
	// collector (drained here by another goroutine): the write system call
	// each line costs, on top of formatting it.
	b.Run("fields, to a pipe", func(b *testing.B) {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		drained := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, r)
			close(drained)
		}()
		base := slog.New(slog.NewTextHandler(w, nil))
		b.ReportAllocs()
		for b.Loop() {
			logDelivered(b, base)
		}
		b.StopTimer()
		_ = w.Close()
		<-drained
	})
	b.Run("derived loggers", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l := base.With("delivery_id", "del_0123456789abcdef")
			l = l.With("subscription_id", "whsub_0123456789", "event_id", "evt_0123456789abcdef")
			l = l.With("attempt", 1)
			l = l.With("trace_id", "0123456789abcdef0123456789abcdef")
			l.Info("delivered", "outcome", "success", "status_code", 200, "latency_ms", 3)
		}
	})
}

// logDelivered writes one successful delivery's line as a handling does.
func logDelivered(b *testing.B, base *slog.Logger) {
	l := newHandlingLog(base, "del_0123456789abcdef")
	l.withRoute("whsub_0123456789", "evt_0123456789abcdef")
	l.withAttempt(1)
	l.withTrace("0123456789abcdef0123456789abcdef")
	l.Log(b.Context(), slog.LevelInfo, "delivered", []any{"outcome", "success", "status_code", 200, "latency_ms", 3})
}
