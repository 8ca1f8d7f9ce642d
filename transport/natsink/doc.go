// Package natsink is jetrelay's NATS transport for nats:// subscription
// URLs. It publishes the stored event to a subject, on the engine's own NATS
// connection (nats:///subject) or on the server the URL names
// (nats://[user:password@]host:port/subject). When the subject belongs to a
// JetStream stream the send succeeds only on the stream's PubAck and carries
// Nats-Msg-Id (the event id) so the stream's duplicate window drops a resend;
// otherwise it is a core publish confirmed by a round trip to the server.
// Identity, signature and traceparent travel as NATS headers with the same
// names as the webhook's HTTP headers.
//
// Importing the package registers the driver for the nats scheme.
package natsink
