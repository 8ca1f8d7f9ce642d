package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A sample belongs to the step that owns the call, wherever in the stack
// that step's function sits: JSON decoded inside a Redis read is JSON, the
// receivers' samples stay out of jetrelay's cost.
func TestCostStepOf_GivesEachSampleToTheStepThatOwnsIt(t *testing.T) {
	for _, tc := range []struct {
		stack []string
		want  string
	}{
		{[]string{"encoding/json.(*decodeState).object", "github.com/jetrelay/jetrelay/proto.ParseEvent", "github.com/jetrelay/jetrelay/internal/store.(*Store).Load", "github.com/jetrelay/jetrelay/engine.(*Engine).process"}, "JSON"},
		{[]string{"syscall.write", "github.com/redis/go-redis/v9.(*baseClient).pipelineProcessCmds", "github.com/jetrelay/jetrelay/internal/store.(*Store).Load"}, "Redis reads"},
		{[]string{"crypto/sha256.block", "crypto/hmac.(*hmac).Write", "github.com/jetrelay/jetrelay/proto.Sign", "github.com/jetrelay/jetrelay/engine.(*Engine).attempt"}, "signing"},
		{[]string{"crypto/sha256.block", "github.com/jetrelay/jetrelay/proto.Verify", "github.com/jetrelay/jetrelay/internal/bench.(*sink).ServeHTTP", "net/http.(*conn).serve"}, stepReceiver},
		{[]string{"github.com/nats-io/nats%2ego.(*Conn).readLoop"}, "fetch and ack (NATS client)"},
		{[]string{"github.com/nats-io/nats-server/v2/server.(*fileStore).storeRawMsg", "github.com/nats-io/nats-server/v2/server.(*stream).processJetStreamMsg"}, "JetStream store"},
		{[]string{"github.com/jetrelay/jetrelay/engine.(*Engine).waitCleared"}, "engine, other"}, // "$" anchors: not a put-off
		{[]string{"github.com/jetrelay/jetrelay/engine.(*Engine).wait", "github.com/jetrelay/jetrelay/engine.(*Engine).process"}, "put-offs"},
		{[]string{"runtime.gcBgMarkWorker"}, "Go GC (background)"},
		{[]string{"main.main"}, stepOther},
	} {
		if got := costStepOf(tc.stack); got != tc.want {
			t.Errorf("costStepOf(%q) = %q, want %q", tc.stack[0], got, tc.want)
		}
	}
}

func TestStatCPU_ReadsUserAndSystemTimePastANameWithSpaces(t *testing.T) {
	stat := "4242 (jet relay) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 12 0 100 0 0"
	got, err := statCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3250 * time.Millisecond; got != want {
		t.Fatalf("statCPU = %s, want %s (utime 250 + stime 75 ticks)", got, want)
	}
	if _, err := statCPU("4242 jetrelay S 1"); err == nil {
		t.Fatal("a stat line without a command name was accepted")
	}
}

// The scenario drains a small backlog twice and reports both halves: the
// figures from outside and the steps.
func TestBench_CostModelScenarioReportsOutsideFiguresAndSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server, jetrelay run and an embedded JetStream")
	}
	out := filepath.Join(t.TempDir(), "cost.md")
	args := []string{"--scenario", "costmodel", "--deliveries", "300", "--settle", "60s", "--relay-binary", buildRelay(t), "--out", out}
	var stdout, stderr bytes.Buffer
	if err := Run(t.Context(), args, &stdout, &stderr, "test"); err != nil {
		t.Fatalf("bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, want := range []string{"| CPU of the `jetrelay run` process |", "| CPU of redis-server |", "| outcome write |", "| POST (client side) |",
		"| **jetrelay's side (receiver excluded)** |", "- signing: proto.Sign over the"} {
		if !strings.Contains(doc, want) {
			t.Errorf("document lacks %q:\n%s", want, doc)
		}
	}
	// Every delivery moved once (LMOVE) and had one outcome script: the
	// command counts are per delivery, not per run.
	for _, cmd := range []string{"LMOVE", "EVALSHA"} {
		m := regexp.MustCompile(cmd + ` ([0-9.]+)`).FindStringSubmatch(doc)
		if m == nil {
			t.Fatalf("no %s count in:\n%s", cmd, doc)
		}
		if per, _ := strconv.ParseFloat(m[1], 64); per < 0.99 || per > 1.5 {
			t.Errorf("%s per delivery = %s, want about 1", cmd, m[1])
		}
	}
}
