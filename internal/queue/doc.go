// Package queue owns jetrelay's JetStream topology: the work-queue stream the
// bridge publishes delivery ids into, the one durable pull consumer every
// engine replica shares, and the encoding of a work item (the delivery id as
// the message body and as its Nats-Msg-Id, so a republished id is absorbed by
// JetStream's dedupe window; a deliberate re-enqueue after the id's message
// was consumed carries a derived Nats-Msg-Id, see RequeueMsgID).
//
// The same stream holds the work that waits (subjects.go, waiting.go): one
// message schedule per delivery that waits for a time (a retry, a put-off),
// and stored messages for deliveries held for an inactive subscription. It
// therefore carries no limits that could evict them; MaxMsgs and MaxBytes
// are back-pressure for the bridge (Room), and CountWaiting counts the
// waiting work cheaply.
package queue
