package bridge

import "github.com/jetrelay/jetrelay/internal/queue"

// QueueConfig names the JetStream dispatch stream the bridge publishes into
// (Stream, Subject, Replicas, Duplicates, MaxMsgs, MaxBytes) and the
// consumer the engine reads it with. The zero value of every field means its
// default (stream JETRELAY_DISPATCH on subject jetrelay.dispatch). It is the
// type the engine consumes by (engine.QueueConfig), so one value configures
// both.
type QueueConfig = queue.Config
