package ops_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// publish stores a message on subj with headers in the dispatch stream.
func (e *opsEnv) publish(t *testing.T, subj string, hdr map[string]string) {
	t.Helper()
	m := nats.NewMsg(subj)
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	// A work item's body is its delivery id (queue.NewMsg).
	m.Data = []byte(cmp.Or(hdr["Nats-Msg-Id"], "work"))
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatalf("publish %s: %v", subj, err)
	}
}

func TestInspect_SaysWhereADeliveryIsAndWhatHappensNext(t *testing.T) {
	e := newOpsEnv(t)
	e.waitingStream(t)
	ctx := context.Background()
	now := time.Now().UTC()
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	paused := e.subscription(t, "acme", "https://hooks.example.com/paused")
	if err := e.admin.SetStatus(ctx, paused, proto.SubscriptionPaused); err != nil {
		t.Fatal(err)
	}

	failed := e.failed(t, sub, now.Add(-time.Hour))
	inRedis := e.delivery(t, sub, proto.DeliveryPending, now.Add(-time.Minute))
	e.redis.Client.LPush(ctx, store.PendingList, inRedis)
	scheduled := e.delivery(t, sub, proto.DeliveryRetrying, now.Add(-time.Minute))
	wake := now.Add(time.Hour).Truncate(time.Second)
	e.publish(t, e.qc.ScheduleSubject(scheduled), map[string]string{
		jetstream.ScheduleHeader: "@at " + wake.Format(time.RFC3339), jetstream.ScheduleTargetHeader: e.qc.Subject,
	})
	held := e.delivery(t, paused, proto.DeliveryPending, now.Add(-time.Minute))
	e.publish(t, e.qc.HeldSubject(paused, held), nil)
	queued := e.delivery(t, sub, proto.DeliveryPending, now.Add(-time.Minute))
	e.publish(t, e.qc.Subject, map[string]string{"Nats-Msg-Id": queued})
	moving := e.delivery(t, sub, proto.DeliveryPending, now.Add(-time.Minute))
	e.redis.Client.SAdd(ctx, "jetrelay:bridges", "bridge-1")
	e.redis.Client.LPush(ctx, "dispatch:processing:bridge-1", moving)
	parked := e.delivery(t, sub, proto.DeliveryRetrying, now.Add(-time.Minute))
	parkedUntil := now.Add(2 * time.Hour).Truncate(time.Millisecond)
	e.redis.Client.ZAdd(ctx, store.LegacyDeferredZSet, redisZ(parkedUntil, parked))
	atIntake := e.delivery(t, sub, proto.DeliveryPending, now.Add(-time.Minute))
	intakeDue := now.Add(30 * time.Minute).Truncate(time.Millisecond)
	e.redis.Client.ZAdd(ctx, store.ParkedZSet(sub), redisZ(intakeDue, atIntake))
	e.redis.Client.SAdd(ctx, store.ParkedSubscriptions, sub)
	if err := store.New(e.redis.Client).SetIntakeHold(ctx, sub, store.IntakeHold{Reason: "breaker_open", Since: now, Until: now.Add(time.Minute), Span: time.Hour, Grace: time.Minute}); err != nil {
		t.Fatal(err)
	}
	stale := e.delivery(t, sub, proto.DeliveryPending, now.Add(-48*time.Hour))
	e.publish(t, e.qc.Subject, nil)

	cases := []struct {
		id, state, next string
	}{
		{failed, "done", "jetrelay deliveries requeue " + failed},
		{inRedis, "redis_pending", "a bridge moves it into JetStream"},
		{moving, "bridge_processing", "a bridge moves it into JetStream"},
		{scheduled, "scheduled", "attempts it again at " + proto.FormatInstant(wake)},
		{held, "held", "subscriptions set-status " + paused + " ACTIVE"},
		{queued, "jetstream", "the engine attempts it (attempt 1)"},
		{parked, "scheduled", "attempts it again at " + proto.FormatInstant(parkedUntil)},
		{atIntake, "parked", "intake hold ends"},
		{stale, "stuck", "older than MAX_DELIVERY_AGE_MS"},
	}
	for _, tc := range cases {
		in, err := e.tool.Inspect(ctx, tc.id, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.state, err)
		}
		if in.Where.State != tc.state || !strings.Contains(in.Next, tc.next) {
			t.Errorf("%s: where=%+v next=%q; want state %s and next containing %q", tc.id, in.Where, in.Next, tc.state, tc.next)
		}
	}
	if in, _ := e.tool.Inspect(ctx, atIntake, nil); !strings.Contains(in.Where.Detail, "intake hold (breaker_open") || in.Where.ScheduledFor != proto.FormatInstant(intakeDue) {
		t.Errorf("parked delivery without its hold or its latest return: %+v", in.Where)
	}
	in, _ := e.tool.Inspect(ctx, held, nil)
	if !strings.Contains(in.Where.Detail, "its subscription is PAUSED") {
		t.Errorf("held without why: %+v", in.Where)
	}
	if _, err := e.tool.Inspect(ctx, "del_unknown", nil); !errors.Is(err, ops.ErrNotFound) {
		t.Errorf("unknown delivery: err = %v", err)
	}
}

func TestInspect_ShowsAttemptsAnswerAndTraceButNeverSecretsOrURLPasswords(t *testing.T) {
	e := newOpsEnv(t)
	sub := e.subscription(t, "acme", "https://svc:hunter2@hooks.example.com/x")
	id := e.failed(t, sub, time.Now().Add(-time.Hour))
	secret, _ := e.redis.Client.Get(context.Background(), store.SecretKey(sub)).Result()

	for _, args := range [][]string{{"deliveries", "inspect", id}, {"deliveries", "inspect", id, "--json"}} {
		out, stderr, err := e.cli(t, map[string]string{"NATS_URL": ""}, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		if strings.Contains(out, "hunter2") || strings.Contains(out, secret) {
			t.Fatalf("%v leaks a secret:\n%s", args, out)
		}
		for _, want := range []string{"***@hooks.example.com", "HTTP 503", id, "requeue"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v lacks %q:\n%s", args, want, out)
			}
		}
	}
	out, _, _ := e.cli(t, nil, "deliveries", "inspect", id, "--json")
	var in ops.Inspection
	if err := json.Unmarshal([]byte(out), &in); err != nil || in.Attempts != 6 || in.Where.State != "done" {
		t.Fatalf("--json: %+v %v", in, err)
	}
}

func TestInspect_SaysWhyJetStreamIsUnknownWithAnEmbeddedServer(t *testing.T) {
	e := newOpsEnv(t)
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	id := e.delivery(t, sub, proto.DeliveryPending, time.Now())
	out, _, err := e.cli(t, nil, "deliveries", "inspect", id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "unknown") || !strings.Contains(out, "JETRELAY_NATS_LISTEN") {
		t.Fatalf("inspect without a reachable JetStream should say why and how:\n%s", out)
	}
}

func TestInspect_SaysWhyAFailedDeliveryHadFewerSendsThanItsPolicy(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	// One send of the default six, HTTP 503: the breaker held it until its
	// retry window ended, then its last-chance send failed.
	held := e.failed(t, sub, time.Now().Add(-time.Hour))
	if _, err := store.New(e.redis.Client).UpdateDelivery(ctx, held, func(*proto.Delivery) (store.Patch, error) {
		return store.Patch{{Name: "attempts", Value: 1}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	out, _, err := e.cli(t, map[string]string{"NATS_URL": ""}, "deliveries", "inspect", held)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1 of 6 sends: the circuit breaker held it while the endpoint kept failing, its retry window ended, and its last send got HTTP 503") {
		t.Fatalf("inspect does not say why one send of six:\n%s", out)
	}
	// Every send used: nothing to explain.
	full := e.failed(t, e.subscription(t, "acme", "https://hooks.example.com/y"), time.Now().Add(-time.Hour))
	if out, _, _ := e.cli(t, map[string]string{"NATS_URL": ""}, "deliveries", "inspect", full); strings.Contains(out, "circuit breaker held it") {
		t.Fatalf("a delivery that used all its sends is explained as held:\n%s", out)
	}
}

// The engine writes a retry's outcome, then moves the work item to its
// wake-up. An inspection that read the record before that write and found
// the wake-up after it showed "scheduled" next to the attempt before, with
// no answer (seen once in a run of the suite): inspect reads the record
// again and shows one at least as new as where it found the work item.
func TestInspect_ARetryRecordedWhileItLooksIsShownWithItsWakeUp(t *testing.T) {
	e := newOpsEnv(t)
	stream := e.waitingStream(t)
	ctx := context.Background()
	now := time.Now().UTC()
	sub := e.subscription(t, "acme", "https://hooks.example.com/x")
	id := e.delivery(t, sub, proto.DeliveryPending, now.Add(-time.Minute))
	e.publish(t, e.qc.Subject, map[string]string{"Nats-Msg-Id": id})
	wake := now.Add(time.Hour).Truncate(time.Second)
	st := store.New(e.redis.Client)
	retried := false
	ops.OnRecordRead(e.tool, func() {
		if retried {
			return
		}
		retried = true
		// What the engine does between the two reads: the attempt's
		// outcome, then the work item's wake-up in its place.
		if _, err := st.UpdateDelivery(ctx, id, func(*proto.Delivery) (store.Patch, error) {
			return store.Patch{
				{Name: "status", Value: proto.DeliveryRetrying},
				{Name: "attempts", Value: 1},
				{Name: "response_status", Value: 503},
				{Name: "error_message", Value: "HTTP 503"},
				{Name: "next_retry_at", Value: wake},
			}, nil
		}); err != nil {
			t.Error(err)
		}
		e.publish(t, e.qc.ScheduleSubject(id), map[string]string{
			jetstream.ScheduleHeader: "@at " + wake.Format(time.RFC3339), jetstream.ScheduleTargetHeader: e.qc.Subject,
		})
		if err := stream.Purge(ctx, jetstream.WithPurgeSubject(e.qc.Subject)); err != nil {
			t.Error(err)
		}
	})
	in, err := e.tool.Inspect(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !retried {
		t.Fatal("the hook never ran")
	}
	if in.Where.State != "scheduled" || in.Attempts != 1 || !strings.Contains(in.LastAnswer, "HTTP 503") || !strings.Contains(in.Next, "attempts it again at") {
		t.Errorf("where=%+v attempts=%d last answer %q next %q; want the retry's record beside its wake-up", in.Where, in.Attempts, in.LastAnswer, in.Next)
	}
}
