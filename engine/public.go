package engine

import "github.com/jetrelay/jetrelay/internal/queue"

// QueueConfig names and sizes the JetStream dispatch stream and the durable
// consumer every engine replica shares: Stream, Subject, Consumer, Replicas,
// Duplicates, MaxMsgs, MaxBytes, AckWait, MaxAckPending, MaxDeliver. The
// zero value of every field means its default (stream JETRELAY_DISPATCH on
// subject jetrelay.dispatch, consumer jetrelay-engine, AckWait 60s,
// MaxAckPending 10000). It is the type the bridge publishes by
// (bridge.QueueConfig), so one value configures both.
type QueueConfig = queue.Config
