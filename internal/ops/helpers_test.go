package ops_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/cli"
	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/proto"
)

// opsEnv is a real Redis and JetStream with admin's writer and a Tool.
type opsEnv struct {
	redis *testenv.RedisEnv
	js    jetstream.JetStream
	qc    queue.Config
	admin *admin.Writer
	tool  *ops.Tool
}

func newOpsEnv(t *testing.T) *opsEnv {
	t.Helper()
	e := &opsEnv{redis: testenv.Redis(t)}
	_, _, e.js = testenv.NATS(t)
	e.qc = queue.Config{}.WithDefaults()
	e.admin = admin.NewWriter(e.redis.Client, nil)
	e.tool = ops.New(ops.Options{Redis: e.redis.Client, JetStream: e.js, Queue: e.qc})
	return e
}

// waitingStream creates the dispatch stream with the subjects where waiting
// work lives (wake-up schedules, held deliveries, ordered lines) next to the
// work items.
func (e *opsEnv) waitingStream(t *testing.T) jetstream.Stream {
	t.Helper()
	s, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: e.qc.Stream, Subjects: []string{e.qc.Subject, e.qc.ScheduleSubjects(), e.qc.HeldSubjects(""), e.qc.OrderedSubjects()},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, AllowMsgSchedules: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// subscription creates an ACTIVE budget.exhausted subscription as admin does.
func (e *opsEnv) subscription(t *testing.T, tenant, url string) string {
	t.Helper()
	id, _, err := e.admin.CreateSubscription(context.Background(), admin.Subscription{
		TenantID: tenant, URL: url, EventTypes: []string{"budget.exhausted"}, CreatedAt: time.Now().Add(-time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// failed stores an event and a FAILED delivery of it to sub, as the engine
// leaves one whose retries ran out, indexed in deliveries:{sub} like admin's
// but not queued anywhere.
func (e *opsEnv) failed(t *testing.T, sub string, attemptedAt time.Time) string {
	t.Helper()
	return e.delivery(t, sub, proto.DeliveryFailed, attemptedAt)
}

func (e *opsEnv) delivery(t *testing.T, sub string, st proto.DeliveryStatus, attemptedAt time.Time) string {
	t.Helper()
	ctx := context.Background()
	ev, err := e.admin.SaveEvent(ctx, admin.Event{EventType: "budget.exhausted", TenantID: "acme", Data: []byte(`{"budget_id":"b1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	d := admin.Delivery{
		DeliveryID: admin.DeliveryID(ev, sub), SubscriptionID: sub, EventID: ev, EventType: "budget.exhausted",
		Status: st, AttemptedAt: attemptedAt, Attempts: 6,
	}
	if st == proto.DeliveryFailed {
		done, code, msg := attemptedAt.Add(31*time.Second), 503, "HTTP 503"
		d.CompletedAt, d.ResponseStatus, d.ErrorMessage = &done, &code, &msg
	}
	if st == proto.DeliveryPending {
		d.Attempts = 0
	}
	if err := e.redis.Client.Set(ctx, store.DeliveryKey(d.DeliveryID), d.JSON(), 14*24*time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.redis.Client.ZAdd(ctx, store.DeliveryIndexKey(sub), redisZ(attemptedAt, d.DeliveryID)).Err(); err != nil {
		t.Fatal(err)
	}
	return d.DeliveryID
}

// cli runs a jetrelay operator command against the env's Redis with env
// settings as an operator's shell would have them.
func (e *opsEnv) cli(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	vars := map[string]string{"REDIS_URL": e.redis.Server.URL(), "MANAGEMENT_PORT": "0"}
	for k, v := range env {
		vars[k] = v
	}
	var out, errOut bytes.Buffer
	root := cli.NewRoot("jetrelay")
	root.AddCommand(ops.Commands(func(k string) string { return vars[k] })...)
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func redisZ(at time.Time, member string) redis.Z {
	return redis.Z{Score: float64(at.UnixMilli()), Member: member}
}
