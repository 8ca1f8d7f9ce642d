// Package telemetry owns jetrelay's OpenTelemetry tracing setup: the tracer
// provider, built from the standard OTEL_* environment variables, exporting
// over OTLP (gRPC or HTTP) and a no-op when no exporter endpoint is
// configured; and how a delivery's trace context is found (its event's
// trace_id) and carried in JetStream message headers.
package telemetry
