// Package queue owns jetrelay's JetStream topology: the work-queue stream the
// bridge publishes delivery ids into, the one durable pull consumer every
// engine replica shares, and the encoding of a work item (the delivery id as
// the message body and as its Nats-Msg-Id, so a republished id is absorbed by
// JetStream's dedupe window; a deliberate re-enqueue after the id's message
// was consumed carries a derived Nats-Msg-Id, see RequeueMsgID).
package queue
