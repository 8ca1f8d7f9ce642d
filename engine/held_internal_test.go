package engine

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetrelay/jetrelay/internal/queue"
	"github.com/jetrelay/jetrelay/internal/testenv"
	"github.com/jetrelay/jetrelay/transport"
)

// A held-check whose handling failed comes back as a new schedule: it must
// keep the probe time and interval and the evidence time the fired check
// carried, and an evidence check its own subject, or the retry probes at
// once with the first interval and an evidence release is lost.
func TestHeldCheckAgain_KeepsTheFiredChecksProbeEvidenceAndSubject(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := context.Background()
	e, err := New(testenv.Redis(t).Client, js, transport.NewRegistry(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	qc := e.cfg.Queue
	if _, err := queue.EnsureStream(ctx, js, qc); err != nil {
		t.Fatal(err)
	}
	cons, err := queue.EnsureConsumer(ctx, js, qc)
	if err != nil {
		t.Fatal(err)
	}
	// fire schedules a held-check on subject and returns it as the server
	// hands it to the engine when it fires (Nats-Scheduler names subject).
	fire := func(subject string) jetstream.Msg {
		t.Helper()
		check := queue.NewHeldCheckMsg(qc, "whsub_1", time.Now().Add(300*time.Millisecond))
		check.Subject = subject
		check.Header.Set(queue.ProbeAtHeader, "2026-11-26T10:00:00Z")
		check.Header.Set(queue.ProbeEveryHeader, "40s")
		check.Header.Set(queue.EvidenceAtHeader, "2026-11-26T09:59:00Z")
		if _, err := js.PublishMsg(ctx, check); err != nil {
			t.Fatal(err)
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		m := <-batch.Messages()
		if m == nil {
			t.Fatal("the held-check did not fire")
		}
		_ = m.Ack()
		return m
	}
	m := fire(qc.EvidenceCheckSubject("whsub_1"))
	again := e.heldCheckAgain(m, "whsub_1", time.Now().Add(time.Second))
	if again.Subject != qc.EvidenceCheckSubject("whsub_1") {
		t.Errorf("retry on %s, want the evidence check's own subject %s", again.Subject, qc.EvidenceCheckSubject("whsub_1"))
	}
	want := map[string]string{queue.ProbeAtHeader: "2026-11-26T10:00:00Z", queue.ProbeEveryHeader: "40s", queue.EvidenceAtHeader: "2026-11-26T09:59:00Z"}
	for k, v := range want {
		if got := again.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q kept", k, got, v)
		}
	}
	// A regular check stays on the regular subject.
	m = fire(qc.HeldCheckSubject("whsub_1"))
	if again := e.heldCheckAgain(m, "whsub_1", time.Now()); again.Subject != qc.HeldCheckSubject("whsub_1") {
		t.Errorf("a regular check's retry on %s", again.Subject)
	}
}
