package queue

import (
	"context"
	"errors"
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
// machine about 100 µs of CPU per delivery at 1,000/s (an eighth of the
// benchmark process's, admin's writers and the receivers included), and a
// tail in the acks' and publishes' latency.
//
// A block that still holds another message is not removed: the ack then
// appends a small delete record to the last block instead. So the bridge
// keeps a keeper message on KeeperSubject, which no consumer reads, and
// renews it (Keep, then DropKeeper of the one before) while it keeps up
// with its intake, which is when the stream is about to be emptied: the
// last block fills and the store moves on to a new one every few thousand
// messages, and a renewed keeper lands in the new last block. Between a
// new block and the next renewal the old behaviour returns, for at most
// one renewal period.
//
// The keeper is not work: it carries no delivery id, the counts jetrelay
// reports leave it out (StoredMsgs), and a hand-back removes it. Each
// running bridge keeps one; a bridge starting removes those that stopped
// bridges left (DropOlderKeepers).

// KeeperSubject is the subject of the stream's keeper message.
func (c Config) KeeperSubject() string { return c.WithDefaults().Subject + ".keep" }

// Keep publishes a new keeper and returns its stream sequence. The caller
// removes its previous keeper once the new one is stored (DropKeeper), so
// the stream is never without one.
func Keep(ctx context.Context, js jetstream.JetStream, c Config) (uint64, error) {
	c = c.WithDefaults()
	// No Nats-Msg-Id: the dedupe window would absorb a renewal.
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: c.KeeperSubject()}, jetstream.WithExpectStream(c.Stream))
	if err != nil {
		return 0, fmt.Errorf("queue: publish the keeper: %w", err)
	}
	return ack.Sequence, nil
}

// DropKeeper removes the keeper stored at seq. One already gone (removed
// by DropOlderKeepers, a hand-back, or a recreated stream) is fine.
func DropKeeper(ctx context.Context, st jetstream.Stream, seq uint64) error {
	err := st.DeleteMsg(ctx, seq)
	if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	// The server reports a sequence already gone as a failed deletion
	// ("no message found"), not as ErrMsgNotFound: check the stream.
	if _, gerr := st.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
		return nil
	}
	return fmt.Errorf("queue: remove the keeper at %d: %w", seq, err)
}

// DropOlderKeepers removes every keeper stored before newest: those that
// bridges no longer running left behind (and those of running bridges,
// which renew theirs). It reads them by subject from the first, one
// lookup each, so where there are none it costs one lookup; a bridge runs
// it once, after its first renewal, and removes its own older keepers by
// their sequence (DropKeeper). (A purge of the subject would make the
// store read every block of the stream.)
func DropOlderKeepers(ctx context.Context, st jetstream.Stream, c Config, newest uint64) error {
	c = c.WithDefaults()
	for seq := uint64(1); seq < newest; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(c.KeeperSubject()))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("queue: look for older keepers: %w", err)
		}
		if m.Sequence >= newest {
			return nil
		}
		if err := DropKeeper(ctx, st, m.Sequence); err != nil {
			return err
		}
		seq = m.Sequence + 1
	}
	return nil
}

// StoredMsgs is the number of messages stored in the dispatch stream other
// than keepers: work items and waiting work. Both counts come from one
// stream info, so a renewal cannot fall between them.
func StoredMsgs(ctx context.Context, st jetstream.Stream, c Config) (uint64, error) {
	c = c.WithDefaults()
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.KeeperSubject()))
	if err != nil {
		return 0, fmt.Errorf("queue: stream %s info: %w", c.Stream, err)
	}
	n := info.State.Msgs
	return n - min(n, info.State.Subjects[c.KeeperSubject()]), nil
}
