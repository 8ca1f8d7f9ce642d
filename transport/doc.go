// Package transport is jetrelay's plug point for destinations: the Transport
// interface every destination kind implements (HTTP webhooks, NATS subjects,
// SQS queues, users' plugins), the Request and Result it exchanges with the
// engine, the identity and trace headers every transport sends alike
// (IdentityHeaders, CustomHeaders), the error classes a transport reports,
// the driver registry (Register; drivers may describe their settings and
// validate their URLs) and the Registry that picks a transport by the
// subscription URL's scheme.
//
// A transport knows nothing about Redis, JetStream, attempts or breakers:
// it sends one Request and says what the destination answered. The engine
// alone decides what happens next.
package transport
