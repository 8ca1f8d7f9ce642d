package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrStreamFull is returned by Room's callers when the dispatch stream holds
// Config.MaxMsgs work items or Config.MaxBytes bytes.
var ErrStreamFull = errors.New("queue: dispatch stream full (maximum messages or bytes reached); ids stay in Redis")

// Unlimited is what Room reports when neither MaxMsgs nor MaxBytes is set.
const Unlimited = -1

// Room reports how many more work items the bridge may publish under
// c.MaxMsgs and c.MaxBytes, or Unlimited. The stream itself carries no
// limits (StreamConfig says why), so this is the only place they bite: the
// bridge publishes no more than Room allows and keeps the rest in Redis.
//
// MaxMsgs counts work items only (the messages on c.Subject, read with a
// one-subject filter, which is cheap whatever else the stream holds), so
// deliveries waiting for a paused subscription never stop intake for the
// others. MaxBytes counts the whole stream, waiting work included: it
// guards the disk.
func Room(ctx context.Context, js jetstream.JetStream, c Config) (int64, error) {
	c = c.WithDefaults()
	if c.MaxMsgs < 0 && c.MaxBytes < 0 {
		return Unlimited, nil
	}
	st, err := js.Stream(ctx, c.Stream)
	if err != nil {
		return 0, fmt.Errorf("queue: stream %s: %w", c.Stream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.Subject))
	if err != nil {
		return 0, fmt.Errorf("queue: stream %s info: %w", c.Stream, err)
	}
	if c.MaxBytes >= 0 && info.State.Bytes >= uint64(c.MaxBytes) {
		return 0, nil
	}
	if c.MaxMsgs < 0 {
		return Unlimited, nil
	}
	return max(0, c.MaxMsgs-int64(info.State.Subjects[c.Subject])), nil
}
