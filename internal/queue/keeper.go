package queue

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The keeper: one message the dispatch stream always holds, so that it is
// never empty.
//
// JetStream's file store keeps a stream in block files and writes new
// messages to the last one. When an ack removes the only message of the
// last block, the store closes that block, creates a new block file to
// remember the last sequence and unlinks the old one (fileStore.
// removeMsgBlock in nats-server v2.15). A work queue that keeps up with its
// intake is empty between most deliveries, so below a few thousand
// deliveries a second nearly every delivery paid for a file created and a
// file deleted, under the stream's lock: on this project's benchmark
// machine about 120 µs of CPU per delivery at 1,000/s, a third of the
// process's, and a tail in the acks' and publishes' latency.
//
// A block that still holds another message is not removed: the ack then
// appends a small delete record to the last block instead. So the bridge
// keeps one keeper message on KeeperSubject, which no consumer reads, and
// renews it (Keep) while it keeps up with its intake, which is when the
// stream is about to be emptied: the last block fills and the store moves
// on to a new one every few thousand messages, and a renewed keeper lands
// in the new last block. Between a new block and the next renewal the old
// behaviour returns, for at most one renewal period.
//
// The keeper is not work: it carries no delivery id, the counts jetrelay
// reports leave it out (StoredMsgs), and a hand-back removes it.

// KeeperSubject is the subject of the stream's keeper message.
func (c Config) KeeperSubject() string { return c.WithDefaults().Subject + ".keep" }

// Keep publishes a new keeper and removes every older one, so the stream
// holds exactly one, in its newest block. Several bridges may keep it at
// once: each leaves the newest keeper, whoever published it.
func Keep(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, c Config) error {
	c = c.WithDefaults()
	// No Nats-Msg-Id: the dedupe window would absorb a renewal.
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: c.KeeperSubject()}); err != nil {
		return fmt.Errorf("queue: publish the keeper: %w", err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(c.KeeperSubject()), jetstream.WithPurgeKeep(1)); err != nil {
		return fmt.Errorf("queue: remove older keepers: %w", err)
	}
	return nil
}

// StoredMsgs is the number of messages stored in the dispatch stream other
// than the keeper: work items and waiting work. info is the stream's info;
// one more request reads the keeper's count.
func StoredMsgs(ctx context.Context, st jetstream.Stream, info *jetstream.StreamInfo, c Config) (uint64, error) {
	c = c.WithDefaults()
	n := info.State.Msgs
	if n == 0 {
		return 0, nil
	}
	ki, err := st.Info(ctx, jetstream.WithSubjectFilter(c.KeeperSubject()))
	if err != nil {
		return 0, fmt.Errorf("queue: count keepers: %w", err)
	}
	return n - min(n, ki.State.Subjects[c.KeeperSubject()]), nil
}
