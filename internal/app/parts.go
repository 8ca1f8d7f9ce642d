package app

import (
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetrelay/jetrelay/bridge"
	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/metrics"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/transport"
)

// The accessors below give the demo and the benchmark the parts they watch
// or drive directly; production code only runs the stack.

// Redis is the stack's Redis client.
func (s *Stack) Redis() *redis.Client { return s.rdb }

// JetStream is the bridge's JetStream context (also used by metrics).
func (s *Stack) JetStream() jetstream.JetStream { return s.js }

// EmbeddedClientURL is the client URL of the embedded NATS server, or ""
// when the stack joined an external one.
func (s *Stack) EmbeddedClientURL() string {
	if s.embedded == nil {
		return ""
	}
	return s.embedded.ClientURL()
}

// Bridge is the stack's bridge, nil unless its role runs one.
func (s *Stack) Bridge() *bridge.Bridge { return s.bridge }

// Engine is the stack's engine, nil unless its role runs one.
func (s *Stack) Engine() *engine.Engine { return s.engine }

// Webhook is the http(s) transport the engine delivers with, nil unless the
// stack runs the engine.
func (s *Stack) Webhook() transport.Transport {
	if s.registry == nil {
		return nil
	}
	t, _ := s.registry.Lookup("https://receiver.invalid/")
	return t
}

// Queue is the dispatch stream, subject and consumer the stack works on.
func (s *Stack) Queue() queue.Config { return s.queue }

// TracerProvider makes the stack's spans (a no-op provider when tracing is
// off), so a demo receiver's spans join the same traces.
func (s *Stack) TracerProvider() trace.TracerProvider { return s.tracing.Provider() }

// Metrics is the stack's metrics, served on /metrics.
func (s *Stack) Metrics() *metrics.Metrics { return s.metrics }
