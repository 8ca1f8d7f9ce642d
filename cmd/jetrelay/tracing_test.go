package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/internal/admin"
)

func TestRun_WithAnOTLPEndpointExportsTheDeliveryTraceAndFlushesItOnSIGTERM(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var exported []byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			mu.Lock()
			exported = append(exported, body...)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	b := newBed(t)
	var tpMu sync.Mutex
	var traceparent string
	_, _ = b.endpoint(t, "/traced", "budget.exhausted", func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tpMu.Lock()
			traceparent = r.Header.Get("traceparent")
			tpMu.Unlock()
			next.ServeHTTP(w, r)
		})
	})
	r := startRelay(t, b.env(
		"OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf",
		// Batch for longer than the test runs: only the shutdown flush
		// can deliver the spans.
		"OTEL_BSP_SCHEDULE_DELAY", "600000",
	))
	ev := event("budget.exhausted")
	_, ids, err := b.writer.Emit(context.Background(), ev, admin.TraceSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	b.awaitSuccess(t, ids, 20*time.Second)
	tpMu.Lock()
	got := traceparent
	tpMu.Unlock()
	if !strings.HasPrefix(got, "00-"+ev.TraceID+"-") {
		t.Errorf("receiver got traceparent %q, want one in the event's trace %s", got, ev.TraceID)
	}

	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if code := r.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("jetrelay exited %d after SIGTERM", code)
	}
	tid, _ := hex.DecodeString(ev.TraceID)
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Contains(exported, tid) {
		t.Fatalf("the collector got %d bytes of spans, none in the event's trace %s", len(exported), ev.TraceID)
	}
	for _, name := range []string{"send jetrelay.dispatch", "process jetrelay.dispatch", "POST"} {
		if !bytes.Contains(exported, []byte(name)) {
			t.Errorf("no %q span exported", name)
		}
	}
}
