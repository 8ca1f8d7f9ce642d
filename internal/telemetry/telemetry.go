package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) does not set one.
const DefaultServiceName = "jetrelay"

// Protocols accepted in OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Tracing is the process's tracer provider. The zero value is not usable;
// create it with New.
type Tracing struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when tracing is off
	protocol string
}

// New builds the tracer provider from the OTEL_* variables read through
// getenv. With neither OTEL_EXPORTER_OTLP_ENDPOINT nor
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, or OTEL_SDK_DISABLED=true, or
// OTEL_TRACES_EXPORTER=none, tracing is off and Provider is a no-op.
// Otherwise spans are batched to an OTLP exporter. getenv decides only
// whether tracing is on and which protocol; the exporters and the SDK read
// the rest from the process environment themselves (OTEL_EXPORTER_OTLP_*
// endpoint, headers, TLS and timeout; OTEL_TRACES_SAMPLER(_ARG); OTEL_BSP_*).
func New(ctx context.Context, getenv func(string) string, version string) (*Tracing, error) {
	if !enabled(getenv) {
		return &Tracing{provider: noop.NewTracerProvider()}, nil
	}
	protocol := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if protocol == "" {
		protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if protocol == "" {
		// The OTLP specification's default.
		protocol = ProtocolHTTP
	}
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	case ProtocolHTTP:
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL must be %q or %q, got %q", ProtocolGRPC, ProtocolHTTP, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP %s exporter: %w", protocol, err)
	}
	res, err := Resource(ctx, version)
	if err != nil {
		return nil, err
	}
	// No sampler option: the SDK then honours OTEL_TRACES_SAMPLER and
	// defaults to parentbased_always_on, which follows the trace flags
	// admin recorded for the event.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{provider: tp, sdk: tp, protocol: protocol}, nil
}

// Resource describes this process: service.name (OTEL_SERVICE_NAME, default
// "jetrelay"), service.version and what OTEL_RESOURCE_ATTRIBUTES adds.
func Resource(ctx context.Context, version string) (*resource.Resource, error) {
	// Later options win: the environment overrides the default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", DefaultServiceName),
			attribute.String("service.version", version),
		),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

func enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != ""
}

// Provider is the tracer provider to hand to the engine: the SDK's when
// tracing is on, a no-op one otherwise.
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t.sdk != nil }

// Protocol is the OTLP protocol in use, "" when tracing is off.
func (t *Tracing) Protocol() string { return t.protocol }

// Shutdown flushes the spans still buffered and stops the exporter. It is a
// no-op when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}
