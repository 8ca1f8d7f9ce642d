package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

func TestDemo_ReceiverSpanIsTheChildOfTheSendSpan(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var requests []*coltrace.ExportTraceServiceRequest
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &coltrace.ExportTraceServiceRequest{}
		if r.URL.Path == "/v1/traces" && proto.Unmarshal(body, req) == nil {
			mu.Lock()
			requests = append(requests, req)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	code, out := runBinary(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
	}, 90*time.Second, "demo", "--events", "2", "--timeout", "60s")
	if code != 0 {
		t.Fatalf("jetrelay demo exited %d:\n%s", code, out)
	}
	type span struct{ name, parent string }
	byID := map[string]span{}
	var receives []span
	mu.Lock()
	for _, req := range requests {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := span{name: s.Name, parent: string(s.ParentSpanId)}
					byID[string(s.SpanId)] = sp
					if strings.HasPrefix(s.Name, "receive webhook /") {
						receives = append(receives, sp)
					}
				}
			}
		}
	}
	mu.Unlock()
	if len(receives) == 0 {
		names := map[string]bool{}
		for _, s := range byID {
			names[s.name] = true
		}
		t.Fatalf("no receiver span exported (%d spans in all: %v)", len(byID), names)
	}
	for _, r := range receives {
		parent, ok := byID[r.parent]
		if !ok || !strings.Contains(parent.name, "POST") {
			t.Fatalf("receiver span's parent is %q (found: %v), want jetrelay's HTTP send span", parent.name, ok)
		}
	}
}
