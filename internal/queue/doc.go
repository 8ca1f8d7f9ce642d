// Package queue owns jetrelay's JetStream topology: the work-queue stream the
// bridge publishes delivery ids into, the one durable pull consumer every
// engine replica shares, and the encoding of a work item (the delivery id as
// the message body and as its Nats-Msg-Id, so a republished id is absorbed by
// JetStream's dedupe window).
package queue
