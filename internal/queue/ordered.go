package queue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Ordered lines (DESIGN decision 17, docs/ordering.md). JetStream has no
// "one at a time per subject" inside a consumer, so each ordered
// subscription gets its own unit: its work items are published on
// <Subject>.ordered.<subscription> (the shared consumer's literal filter
// does not match them), and one durable consumer per ordered subscription
// filtered on exactly that subject hands them out one at a time
// (MaxAckPending 1), in stream order, to one replica at a time (a
// pinned-client priority group). A replica that stops pulling (SIGKILL)
// loses the pin after OrderedPinnedTTL, and its unacked item comes back
// after OrderedAckWait, which its owner keeps alive while it works.
//
// A line consumer keeps its state in memory (the items stay in the file
// stream). A file-backed consumer writes its state file on every ack, and
// with a hundred busy lines those writes were the largest share of what
// the lines cost the unordered subscriptions beside them (docs/ordering.md).
// Nothing is lost with the memory: on a work-queue stream an acked item is
// deleted, so a consumer made again after a restart forgot it (standalone)
// or came back empty (a whole cluster restarted) starts at the line's first
// unacked item, in order: the one that was in flight is sent again, as after
// any crash. On a cluster the state is replicated like any consumer's, so
// one node's loss forgets nothing.

// Settings of the ordered lines' consumers.
const (
	// OrderedAckWait is how long a dead owner's item blocks its line.
	OrderedAckWait = 5 * time.Second
	// OrderedPinnedTTL is how long a replica that stopped pulling keeps
	// its pin; its pulls expire every OrderedPullExpiry.
	OrderedPinnedTTL  = 5 * time.Second
	OrderedPullExpiry = 2 * time.Second
	// OrderedIdle deletes a line's consumer after it has had no pull for
	// this long (its subscription sent nothing ordered for a while).
	OrderedIdle = 10 * time.Minute
	// OrderedGroup is the priority group every replica pulls in.
	OrderedGroup = "line"
)

// OrderedSubject is where the bridge publishes the work items of
// subscriptionID while it is ordered.
func (c Config) OrderedSubject(subscriptionID string) string {
	return c.WithDefaults().Subject + ".ordered." + SubjectToken(subscriptionID)
}

// OrderedSubjects is the wildcard that matches every ordered line.
func (c Config) OrderedSubjects() string { return c.WithDefaults().Subject + ".ordered.>" }

// OrderedConsumerName is the durable of subscriptionID's line.
func (c Config) OrderedConsumerName(subscriptionID string) string {
	return c.OrderedConsumerPrefix() + SubjectToken(subscriptionID)
}

// OrderedConsumerPrefix starts the name of every ordered line's consumer.
func (c Config) OrderedConsumerPrefix() string { return c.WithDefaults().Consumer + "-line-" }

// OrderedConsumerConfig is the consumer of subscriptionID's line.
func OrderedConsumerConfig(c Config, subscriptionID string) jetstream.ConsumerConfig {
	c = c.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:           c.OrderedConsumerName(subscriptionID),
		Description:       "jetrelay: ordered line of subscription " + subscriptionID,
		AckPolicy:         jetstream.AckExplicitPolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		FilterSubject:     c.OrderedSubject(subscriptionID),
		AckWait:           OrderedAckWait,
		MaxAckPending:     1,
		MaxDeliver:        -1,
		PriorityPolicy:    jetstream.PriorityPolicyPinned,
		PriorityGroups:    []string{OrderedGroup},
		PinnedTTL:         OrderedPinnedTTL,
		InactiveThreshold: OrderedIdle,
		MemoryStorage:     true,
	}
}

// EnsureOrderedConsumer creates subscriptionID's line consumer, or updates
// it to this build's settings. A line consumer a build before memory-backed
// lines made (its state on file) cannot be changed to memory: the server
// refuses to change a consumer's storage. It keeps its storage and gets
// every other setting; the server deletes it once the line has been idle
// for OrderedIdle, and the next one is made in memory.
func EnsureOrderedConsumer(ctx context.Context, js jetstream.JetStream, c Config, subscriptionID string) (jetstream.Consumer, error) {
	want := OrderedConsumerConfig(c, subscriptionID)
	stream := c.WithDefaults().Stream
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, want)
	if err != nil {
		if have, herr := js.Consumer(ctx, stream, want.Durable); herr == nil && have.CachedInfo().Config.MemoryStorage != want.MemoryStorage {
			want.MemoryStorage = have.CachedInfo().Config.MemoryStorage
			cons, err = js.CreateOrUpdateConsumer(ctx, stream, want)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: ordered line of %s: %w", subscriptionID, err)
	}
	return cons, nil
}

// OrderedLines lists the subscriptions whose line holds work items (queued
// or in flight), with how many. It is one stream info with a subject
// filter: one entry per ordered subscription, not per item.
func OrderedLines(ctx context.Context, js jetstream.JetStream, c Config) (map[string]uint64, error) {
	c = c.WithDefaults()
	st, err := js.Stream(ctx, c.Stream)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.OrderedSubjects()))
	if err != nil {
		return nil, err
	}
	prefix := c.Subject + ".ordered."
	out := make(map[string]uint64, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		tok, ok := strings.CutPrefix(subj, prefix)
		if !ok {
			continue
		}
		if id, ok := ParseSubjectToken(tok); ok {
			out[id] = n
		}
	}
	return out, nil
}
