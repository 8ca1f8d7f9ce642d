package store

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/groupcommit"
)

// Outcomes that come together are written together (issue 22). Each
// outcome is one compare-and-set of a delivery and, when it changes it,
// its subscription (casPairFn). One script call per outcome costs, on
// redis-server, about what the script's own work costs again (measured on
// these machines: a script that only returns, given an outcome's
// arguments, 6.3 µs per call; the outcome script 10 µs; a plain SET 2 µs),
// and a command's bookkeeping in the client. So outcomes are group
// committed (internal/groupcommit): those finishing while one batch is
// written go out in the next call of casPairManyLua, which runs each
// outcome's compare-and-set in turn and answers each its own code. A lone
// outcome waits for nothing.
//
// Every guarantee holds per outcome: each is compared and written on its
// own (two outcomes of one subscription in one batch: the second finds
// the record the first wrote, answers "changed underneath", and is read
// again and retried by its caller, as when they raced before), each
// caller learns its own code, and no caller returns before its outcome
// is written or known not to be. A batch that cannot be sent fails the
// outcomes in it, each retried as before.

// outcomeBatch bounds one script call: its keys (two per outcome) and
// arguments (five per outcome: both records as read and as patched).
const outcomeBatch = 64

// casPairManyLua runs casPairFn for many outcomes: outcome i has the keys
// KEYS[2i-1] (the delivery) and KEYS[2i] (its subscription) and the
// arguments ARGV[5i-4 .. 5i], casPairLua's ARGV[1 .. 5]. It returns one
// code per outcome, casPairLua's.
const casPairManyLua = casPairFn + `local out = {}
for i = 1, #KEYS / 2 do
  local a = 5 * (i - 1)
  out[i] = casPair(KEYS[2*i-1], KEYS[2*i], ARGV[a+1], ARGV[a+2], ARGV[a+3], ARGV[a+4], ARGV[a+5])
end
return out`

// pendingOutcome is one outcome's compare-and-set and, once its batch is
// written, its code or the batch's error.
type pendingOutcome struct {
	keys [2]string
	args [5]any
	res  int
	err  error
}

// outcomeCommits is a Store's group commit of outcomes.
type outcomeCommits struct {
	script *redis.Script
	run    redis.Scripter
	batch  *groupcommit.Committer[*pendingOutcome]
}

func newOutcomeCommits(run redis.Scripter) *outcomeCommits {
	c := &outcomeCommits{script: redis.NewScript(casPairManyLua), run: run}
	c.batch = groupcommit.New(outcomeBatch, c.write)
	return c
}

// casPair runs one outcome's compare-and-set (casPairLua's keys and
// arguments) in a batch with whatever other outcomes are queued, and
// returns its code.
func (c *outcomeCommits) casPair(ctx context.Context, dKey, sKey string, args [5]any) (int, error) {
	p := &pendingOutcome{keys: [2]string{dKey, sKey}, args: args}
	if err := c.batch.Do(ctx, p); err != nil {
		return 0, err
	}
	return p.res, p.err
}

// write runs one batch's compare-and-sets in one script call.
func (c *outcomeCommits) write(ctx context.Context, batch []*pendingOutcome) {
	keys := make([]string, 0, 2*len(batch))
	args := make([]any, 0, 5*len(batch))
	for _, p := range batch {
		keys = append(keys, p.keys[:]...)
		args = append(args, p.args[:]...)
	}
	codes, err := c.script.Run(ctx, c.run, keys, args...).Int64Slice()
	if err == nil && len(codes) != len(batch) {
		err = fmt.Errorf("the outcome script answered %d codes for %d outcomes", len(codes), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			p.err = err
			continue
		}
		p.res = int(codes[i])
	}
}
