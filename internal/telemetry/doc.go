// Package telemetry owns jetrelay's OpenTelemetry tracer provider: built from
// the standard OTEL_* environment variables, exporting over OTLP (gRPC or
// HTTP), and a no-op when no exporter endpoint is configured.
package telemetry
