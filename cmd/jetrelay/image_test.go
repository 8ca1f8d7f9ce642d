package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// TestImage_RunsDeliversProbesAndDrains builds the FROM scratch image
// (deploy/image) and runs `jetrelay run` in it with podman against a
// redis-server, a NATS server and a receiver on the host: it must deliver a
// signed webhook, answer its probes (HTTP and its own healthcheck command,
// as a scratch image has no wget) and drain on SIGTERM within its timeout.
func TestImage_RunsDeliversProbesAndDrains(t *testing.T) {
	p := newPodman(t)
	image := p.buildImage(t, "build.sh", "jetrelay")
	if user := p.run(t, time.Minute, "image", "inspect", "--format", "{{.Config.User}}", image); user != "65532:65532" {
		t.Errorf("image user %q, want the non-root 65532:65532", user)
	}

	b := newBed(t)
	_, ep := b.endpoint(t, "/hook", "budget.exhausted", nil)
	stuck := newHold()
	b.endpoint(t, "/stuck", "budget.threshold_crossed", stuck.wrap)

	const drain = 2 * time.Second
	port := freePort(t)
	env := b.env("MANAGEMENT_PORT", strconv.Itoa(port), "JETRELAY_MANAGEMENT_HOST", "127.0.0.1",
		"JETRELAY_DRAIN_TIMEOUT", drain.String(), "JETRELAY_ACK_WAIT", "2s")
	for k, v := range loopbackAllowed {
		env[k] = v
	}
	args := []string{"--stop-timeout", "30"}
	for k, v := range env {
		args = append(args, "-e", k+"="+v)
	}
	name := p.container(t, "jetrelay", append(args, image, "run")...)
	r := &relay{mgmt: "http://127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}

	ids := b.emit(t, "budget.exhausted", 3)
	b.awaitSuccess(t, ids, 60*time.Second)
	if st := ep.Stats(); st.Unique != len(ids) || st.BadSig != 0 {
		t.Errorf("receiver stats %+v, want %d distinct correctly signed deliveries", st, len(ids))
	}

	r.awaitHTTP(t, "/readyz", http.StatusOK, 30*time.Second)
	if code, body := r.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answered %d %s, want 200", code, body)
	}
	if out, err := p.try(time.Minute, "exec", name, "/usr/local/bin/jetrelay", "healthcheck"); err != nil {
		t.Errorf("jetrelay healthcheck in the container: %v %s, want exit 0", err, out)
	}
	if out, err := p.try(time.Minute, "exec", name, "/usr/local/bin/jetrelay", "healthcheck", "--url", "http://127.0.0.1:1/readyz"); err == nil {
		t.Errorf("jetrelay healthcheck against a closed port exited 0 (%s), want 1", out)
	}
	if out, err := p.try(time.Minute, "healthcheck", "run", name); err != nil {
		t.Errorf("podman healthcheck run (the image's HEALTHCHECK): %v %s, want healthy", err, out)
	}

	stuckIDs := b.emit(t, "budget.threshold_crossed", 2)
	stuck.awaitHeld(t, 2, 30*time.Second)
	sent := time.Now()
	p.run(t, time.Minute, "kill", "--signal", "TERM", name)
	const margin = 5 * time.Second
	code := p.run(t, drain+margin+30*time.Second, "wait", name)
	took := time.Since(sent)
	t.Logf("container exited %s after SIGTERM (drain timeout %s)", took.Round(time.Millisecond), drain)
	if code != "0" {
		t.Errorf("container exited %s after SIGTERM, want 0", code)
	}
	if took > drain+margin {
		t.Errorf("container took %s to stop after SIGTERM, want at most the drain timeout %s plus %s", took, drain, margin)
	}
	logs, _ := p.try(time.Minute, "logs", name)
	if !strings.Contains(logs, "drain") {
		t.Errorf("container logs do not mention the drain:\n%s", logs)
	}
	for id, st := range b.statuses(stuckIDs) {
		if st != proto.DeliveryPending && st != proto.DeliveryRetrying {
			t.Errorf("cut-off delivery %s is %s after the drain, want it released as PENDING or RETRYING", id, st)
		}
	}
	// What the drained container released goes out from the next replica.
	stuck.open()
	startRelay(t, b.env("JETRELAY_ACK_WAIT", "2s"))
	b.awaitSuccess(t, stuckIDs, 30*time.Second)
}
