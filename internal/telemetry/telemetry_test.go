package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/jetrelay/jetrelay/internal/telemetry"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestNew_IsOffWithoutAnEndpoint(t *testing.T) {
	cases := []map[string]string{
		{},
		{"OTEL_SERVICE_NAME": "x"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"},
	}
	for _, env := range cases {
		tr, err := telemetry.New(context.Background(), envOf(env), "test")
		if err != nil {
			t.Fatal(err)
		}
		if tr.Enabled() {
			t.Errorf("%v: tracing is on", env)
		}
		_, span := tr.Provider().Tracer("t").Start(context.Background(), "s")
		if span.IsRecording() || span.SpanContext().IsValid() {
			t.Errorf("%v: the no-op provider made a real span", env)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Errorf("%v: shutdown: %v", env, err)
		}
	}
}

func TestNew_RefusesAnUnknownProtocol(t *testing.T) {
	_, err := telemetry.New(context.Background(), envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
	}), "test")
	if err == nil || !strings.Contains(err.Error(), "http/json") {
		t.Fatalf("err = %v, want one naming the protocol", err)
	}
}

// The exporters read the process environment themselves, so this test sets
// it (and therefore does not run in parallel).
func TestShutdown_FlushesSpansToTheOTLPHTTPEndpoint(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var bodies int
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		bodies += len(b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")

	tr, err := telemetry.New(context.Background(), os.Getenv, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled() || tr.Protocol() != telemetry.ProtocolHTTP {
		t.Fatalf("enabled=%v protocol=%q, want on over http/protobuf", tr.Enabled(), tr.Protocol())
	}
	_, span := tr.Provider().Tracer("t").Start(context.Background(), "flushed")
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 || paths[0] != "/v1/traces" || bodies == 0 {
		t.Fatalf("collector saw paths %v with %d body bytes, want a POST to /v1/traces with the span", paths, bodies)
	}
}

func TestResource_NamesTheServiceAndVersion(t *testing.T) {
	cases := []struct{ envName, want string }{{"", "jetrelay"}, {"relay-eu", "relay-eu"}}
	for _, c := range cases {
		t.Setenv("OTEL_SERVICE_NAME", c.envName)
		res, err := telemetry.Resource(context.Background(), "1.2.3")
		if err != nil {
			t.Fatal(err)
		}
		got := map[attribute.Key]string{}
		for _, kv := range res.Attributes() {
			got[kv.Key] = kv.Value.Emit()
		}
		if got["service.name"] != c.want || got["service.version"] != "1.2.3" {
			t.Errorf("OTEL_SERVICE_NAME=%q: service.name=%q service.version=%q, want %q and 1.2.3", c.envName, got["service.name"], got["service.version"], c.want)
		}
	}
}
