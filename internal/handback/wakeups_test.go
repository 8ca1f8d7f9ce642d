package handback_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/handback"
	"github.com/jetrelay/jetrelay/internal/natsserver"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
)

// waiting is a set of deliveries a stopped jetrelay left as wake-ups: the
// retries among them must reach dispatch:retry with their due time (when
// they are handed back before they fire), everything else dispatch:pending.
type waiting struct {
	ids      []string
	retrying map[string]time.Time
}

// wakeUps stores n deliveries per due time, every other one RETRYING (its
// record says so) and the rest put off (PENDING), and publishes each one's
// wake-up with publish.
func wakeUps(t *testing.T, w *world, publish func(*testing.T, string, time.Time), dues ...time.Time) *waiting {
	t.Helper()
	ctx := context.Background()
	ws := &waiting{retrying: map[string]time.Time{}}
	for d, due := range dues {
		for i := range 40 {
			id := fmt.Sprintf("del_wake%02d_%04d", d, i)
			status := "PENDING"
			if i%2 == 0 {
				status = "RETRYING"
				ws.retrying[id] = due
			}
			w.rdb.Set(ctx, store.DeliveryKey(id), `{"delivery_id":"`+id+`","subscription_id":"whsub_1","event_id":"evt_1","status":"`+status+`","attempts":1}`, time.Hour)
			publish(t, id, due)
			ws.ids = append(ws.ids, id)
		}
	}
	return ws
}

// check asserts that every delivery is where the reference reads it, each
// retry still waiting for its time unless it fired first, and that nothing
// of jetrelay's is left in the stream.
func (ws *waiting) check(t *testing.T, w *world, msgsLeft uint64) {
	t.Helper()
	pending := map[string]bool{}
	for _, id := range w.pending(t) {
		pending[id] = true
	}
	retry := w.retry(t)
	var lost []string
	for _, id := range ws.ids {
		score, inRetry := retry[id]
		switch {
		case !inRetry && !pending[id]:
			lost = append(lost, id)
		case inRetry && pending[id]:
			t.Errorf("%s is in both dispatch:pending and dispatch:retry", id)
		case inRetry && ws.retrying[id].IsZero():
			t.Errorf("%s (put off, not a retry) is in dispatch:retry", id)
		case inRetry && score != ws.retrying[id].UnixMilli():
			t.Errorf("%s is in dispatch:retry scored %d, want its due time %d", id, score, ws.retrying[id].UnixMilli())
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d deliveries are in neither dispatch:pending nor dispatch:retry, e.g. %v", len(lost), len(ws.ids), lost[:min(5, len(lost))])
	}
	if msgsLeft != 0 {
		t.Errorf("%d messages left in the dispatch stream", msgsLeft)
	}
}

func TestRun_HandsBackWakeUpsThatFireWhileItScans(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for i := range 20 {
		w.publish(t, queue.NewMsg(w.qc.Subject, fmt.Sprintf("del_queued%08d", i)))
	}
	publish := func(t *testing.T, id string, due time.Time) { w.publish(t, queue.NewScheduleMsg(w.qc, id, due)) }
	later := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	soon := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	ws := wakeUps(t, w, publish, later, soon)
	for i := range 20 {
		ws.ids = append(ws.ids, fmt.Sprintf("del_queued%08d", i))
	}
	info, err := w.s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lastBefore := info.State.LastSeq

	// The scan is held at its first message until every soon wake-up has
	// fired: their work items are stored past where the stream ended when
	// the scan began.
	var once sync.Once
	hold := func(uint64) {
		once.Do(func() {
			deadline := time.Now().Add(30 * time.Second)
			for {
				info, err := w.s.Info(ctx)
				if err == nil && info.State.LastSeq >= lastBefore+40 {
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("the soon wake-ups did not fire within 30s: %v", err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	rep, err := handback.Run(ctx, w.rdb, w.js, handback.WithAfterRead(handback.Config{Queue: w.qc}, hold))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report: %+v", rep)
	ws.check(t, w, w.streamMsgs(t))
}

// Every overdue wake-up fires as soon as a server opens the store, which
// is what `jetrelay handback` does with the embedded server.
func TestCommand_HandsBackWakeUpsThatFellDueWhileJetrelayWasStopped(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := natsserver.Start(ctx, natsserver.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	re := testenv.Redis(t)
	w := &world{rdb: re.Client, qc: queue.Config{}.WithDefaults()}
	if w.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if w.s, err = queue.EnsureStream(ctx, w.js, w.qc); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.EnsureConsumer(ctx, w.js, w.qc); err != nil {
		t.Fatal(err)
	}
	// Due while jetrelay is stopped, each a little after the one before.
	var dues []time.Time
	start := time.Now().Add(time.Second)
	for i := range 5 {
		dues = append(dues, start.Add(time.Duration(i)*100*time.Millisecond).Truncate(time.Millisecond))
	}
	dues = append(dues, time.Now().Add(time.Hour).Truncate(time.Millisecond))
	var async []jetstream.PubAckFuture
	ws := wakeUps(t, w, func(t *testing.T, id string, due time.Time) {
		f, err := w.js.PublishMsgAsync(queue.NewScheduleMsg(w.qc, id, due))
		if err != nil {
			t.Fatal(err)
		}
		async = append(async, f)
	}, dues...)
	for _, f := range async {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		}
	}
	nc.Close()
	srv.Shutdown()
	// Wait, with jetrelay stopped, until the last of them is overdue.
	time.Sleep(time.Until(dues[len(dues)-2]) + 100*time.Millisecond)

	cfg := &config.Config{RedisURL: re.Server.URL(), DataDir: dir}
	var out strings.Builder
	if err := handback.Command(ctx, cfg, slog.New(slog.DiscardHandler), &out); err != nil {
		t.Fatalf("handback: %v\n%s", err, out.String())
	}
	t.Log(out.String())

	srv, err = natsserver.Start(ctx, natsserver.Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err = srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w.js, _ = jetstream.New(nc)
	if w.s, err = w.js.Stream(ctx, w.qc.Stream); err != nil {
		t.Fatal(err)
	}
	ws.check(t, w, w.streamMsgs(t))
}
