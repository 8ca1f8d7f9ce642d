package queue_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/queue"
)

// newestBlock is the index of the stream's newest block file (N in N.blk):
// the file store numbers each new block one higher.
func newestBlock(t *testing.T, storeDir, stream string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(storeDir, "jetstream", "*", "streams", stream, "msgs", "*.blk"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no block files of stream %s under %s (%v)", stream, storeDir, err)
	}
	newest := 0
	for _, f := range files {
		n, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".blk"))
		if err != nil {
			t.Fatalf("block file %s: %v", f, err)
		}
		newest = max(newest, n)
	}
	return newest
}

func TestKeep_AStreamEmptiedByEveryAckStopsReplacingItsBlockFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var c queue.Config
	st, err := queue.EnsureStream(ctx, js, c)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := queue.EnsureConsumer(ctx, js, c)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	// oneByOne queues work items one at a time, each taken and acked
	// before the next is published, as a queue that keeps up with a low
	// rate is: every ack empties the stream of work.
	oneByOne := func(items int) {
		t.Helper()
		for range items {
			n++
			id := fmt.Sprintf("d%d", n)
			if _, err := js.PublishMsg(ctx, queue.NewMsg(c.WithDefaults().Subject, id)); err != nil {
				t.Fatal(err)
			}
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for m := range batch.Messages() {
				got++
				if d, err := queue.DeliveryID(m); err != nil || d != id {
					t.Fatalf("the consumer took %q (%v), want work item %s: the keeper is not work", m.Subject(), err, id)
				}
				if err := m.DoubleAck(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got != 1 {
				t.Fatalf("fetched %d work items, want 1 (%v)", got, batch.Error())
			}
		}
	}

	// Without a keeper the file store replaces its block file each time
	// an ack empties the stream. If this stops being so, the keeper has
	// no work left to do.
	before := newestBlock(t, dir, c.WithDefaults().Stream)
	oneByOne(20)
	if churned := newestBlock(t, dir, c.WithDefaults().Stream) - before; churned < 10 {
		t.Fatalf("without a keeper 20 acks that emptied the stream created %d block files; the keeper exists because the store replaces its last block whenever it empties", churned)
	}

	// A keeper a stopped bridge left, and one of bridge b1 whose publish
	// was stored but whose acknowledgement was lost; then three renewals
	// of b1: each removes b1's keepers first, whatever their sequence.
	for _, b := range []string{"stopped", "b1"} {
		if err := queue.Keep(ctx, js, c, b); err != nil {
			t.Fatalf("Keep: %v", err)
		}
	}
	for range 3 {
		if err := queue.DropKeepers(ctx, st, c, "b1"); err != nil {
			t.Fatalf("DropKeepers: %v", err)
		}
		if err := queue.Keep(ctx, js, c, "b1"); err != nil {
			t.Fatalf("Keep: %v", err)
		}
	}
	if err := queue.DropKeepers(ctx, st, c, "stopped"); err != nil {
		t.Fatalf("DropKeepers of a stopped bridge: %v", err)
	}
	before = newestBlock(t, dir, c.WithDefaults().Stream)
	oneByOne(50)
	if churned := newestBlock(t, dir, c.WithDefaults().Stream) - before; churned > 1 {
		t.Errorf("with a keeper 50 acks that emptied the stream of work created %d block files, want at most 1", churned)
	}

	info, err := st.Info(ctx, jetstream.WithSubjectFilter(c.KeeperSubjects()))
	if err != nil {
		t.Fatal(err)
	}
	if k := info.State.Subjects[c.KeeperSubject("b1")]; k != 1 || info.State.Msgs != 1 {
		t.Errorf("the stream holds %d messages, %d of them b1's keepers (subjects %v); want only b1's one keeper", info.State.Msgs, k, info.State.Subjects)
	}
	stored, err := queue.StoredMsgs(ctx, st, c)
	if err != nil || stored != 0 {
		t.Errorf("StoredMsgs = %d, %v; want 0: the keeper is not work", stored, err)
	}
}
