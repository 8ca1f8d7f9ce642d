package queue

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The keeper: messages that keep the dispatch stream from being empty.
//
// JetStream's file store keeps a stream in block files and writes new
// messages to the last one. When an ack removes the only message of the
// last block, the store closes that block, creates a new block file to
// remember the last sequence and unlinks the old one (fileStore.
// removeMsgBlock in nats-server v2.15). A work queue that keeps up with its
// intake is empty between most deliveries, so below a few thousand
// deliveries a second nearly every delivery paid for a file created and a
// file deleted, under the stream's lock: on this project's benchmark
// machine about 100 µs of CPU per delivery at 1,000/s (an eighth of the
// benchmark process's, admin's writers and the receivers included), and a
// tail in the acks' and publishes' latency.
//
// A block that still holds another message is not removed: the ack then
// appends a small delete record to the last block instead. So each bridge
// keeps one keeper message, on a subject of its own (KeeperSubject) that
// no consumer reads, and renews it while it keeps up with its intake,
// which is when the stream is about to be emptied: the last block fills
// and the store moves on to a new one every few thousand messages, and a
// renewed keeper lands in the new last block. Between a new block and the
// next renewal the old behaviour returns, for at most one renewal period
// of the bridge's own publishes (wake-ups and released holds, which the
// engines publish, fill blocks too).
//
// A renewal first removes the bridge's keepers (DropKeepers), then stores
// a new one (Keep). Removing them all by subject never touches anything
// else, whatever happened to the stream meanwhile, and also removes one
// whose publish was stored but not acknowledged. It also takes the
// subject's count to zero, so the store's index of the subject starts
// afresh with the new keeper: a subject whose count never reaches zero
// keeps pointing lookups at the first block it was seen in, and makes
// each of them read the blocks after it. For the moment between the two
// the stream may hold no keeper of this bridge: at most one block file
// replaced.
//
// The keepers are not work: they carry no delivery id, the counts jetrelay
// reports leave them out (StoredMsgs), and a hand-back removes them. A
// bridge that adopts a stopped bridge's processing list and forgets it
// removes its keeper too.

// KeeperSubject is the subject of bridge instanceID's keeper message.
func (c Config) KeeperSubject(instanceID string) string {
	return c.KeeperSubjects()[:len(c.KeeperSubjects())-1] + SubjectToken(instanceID)
}

// KeeperSubjects is the wildcard that matches every bridge's keeper.
func (c Config) KeeperSubjects() string { return c.WithDefaults().Subject + ".keep.>" }

// Keep stores a new keeper for bridge instanceID (see DropKeepers for
// the one before).
func Keep(ctx context.Context, js jetstream.JetStream, c Config, instanceID string) error {
	c = c.WithDefaults()
	// No Nats-Msg-Id: the dedupe window would absorb a renewal.
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: c.KeeperSubject(instanceID)}, jetstream.WithExpectStream(c.Stream)); err != nil {
		return fmt.Errorf("queue: publish the keeper: %w", err)
	}
	return nil
}

// DropKeepers removes bridge instanceID's keepers: before its renewal,
// and for a bridge that stopped for good.
func DropKeepers(ctx context.Context, st jetstream.Stream, c Config, instanceID string) error {
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(c.KeeperSubject(instanceID))); err != nil {
		return fmt.Errorf("queue: remove the keeper of %s: %w", instanceID, err)
	}
	return nil
}

// IsKeeper reports whether subject is a keeper's.
func (c Config) IsKeeper(subject string) bool {
	w := c.KeeperSubjects()
	return strings.HasPrefix(subject, w[:len(w)-1])
}

// StoredMsgs is the number of messages stored in the dispatch stream other
// than keepers: work items and waiting work. Both counts come from one
// stream info, so a renewal cannot fall between them.
func StoredMsgs(ctx context.Context, st jetstream.Stream, c Config) (uint64, error) {
	c = c.WithDefaults()
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.KeeperSubjects()))
	if err != nil {
		return 0, fmt.Errorf("queue: stream %s info: %w", c.Stream, err)
	}
	var keepers uint64
	for _, n := range info.State.Subjects {
		keepers += n
	}
	n := info.State.Msgs
	return n - min(n, keepers), nil
}
