package soak

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/jetrelay/jetrelay/internal/freeport"
)

// relay is one jetrelay process of the soak.
type relay struct {
	name  string
	role  string // JETRELAY_ROLE
	space *keyspace
	proc  *proc
	mgmt  string
}

// drainTimeout is JETRELAY_DRAIN_TIMEOUT of every soak process.
const drainTimeout = 3 * time.Second

// relayEnv are the settings every soak process shares: short timers so a
// run of minutes goes through many retry schedules, breaker periods and
// redeliveries.
func relayEnv(keyB64 string) map[string]string {
	return map[string]string{
		"WEBHOOK_SECRET_ENCRYPTION_KEY": keyB64,
		"JETRELAY_SSRF_ALLOW_CIDRS":     "127.0.0.0/8",
		"JETRELAY_SSRF_ALLOW_HTTP":      "true",
		"JETRELAY_WORKERS":              "16",
		"JETRELAY_ACK_WAIT":             "3s",
		"JETRELAY_HTTP_REQUEST_TIMEOUT": httpTimeout.String(),
		"JETRELAY_BREAKER_OPEN":         "2s",
		"JETRELAY_BREAKER_MAX_OPEN":     "30s",
		"JETRELAY_INACTIVE_RECHECK":     "1s",
		"JETRELAY_DRAIN_TIMEOUT":        drainTimeout.String(),
		"JETRELAY_MANAGEMENT_HOST":      "127.0.0.1",
		"JETRELAY_LOG_LEVEL":            "warn",
	}
}

func newRelay(bin, name, role string, space *keyspace, env map[string]string) (*relay, error) {
	ports, err := freeport.Take(1)
	if err != nil {
		return nil, err
	}
	full := maps.Clone(env)
	maps.Copy(full, space.env)
	full["JETRELAY_ROLE"] = role
	full["JETRELAY_BRIDGE_ID"] = name
	full["MANAGEMENT_PORT"] = strconv.Itoa(ports[0])
	return &relay{
		name: name, role: role, space: space,
		proc: newProc("jetrelay "+name, bin, []string{"run"}, cleanEnv(full)),
		mgmt: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
	}, nil
}

// start runs the process and waits until its management server answers
// /healthz.
func (r *relay) start(ctx context.Context) error {
	if err := r.proc.start(); err != nil {
		return err
	}
	c := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if !r.proc.running() {
			return fmt.Errorf("jetrelay %s exited at start (code %d):\n%s", r.name, r.proc.exitCode(), r.proc.log.String())
		}
		if resp, err := c.Get(r.mgmt + "/healthz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("jetrelay %s: /healthz did not answer 200 within a minute:\n%s", r.name, r.proc.log.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopGrace is how long a SIGTERMed process may take beyond its drain
// timeout before the soak kills it and reports it.
const stopGrace = 10 * time.Second

// stop ends the process with sig: SIGKILL as a crash, SIGTERM as an
// orderly stop that drains. A process that ignores SIGTERM past its drain
// timeout is killed and reported, and the run goes on.
func (r *relay) stop(sig syscall.Signal, rep *Report) {
	if err := r.proc.stop(sig, drainTimeout+stopGrace); err != nil {
		rep.violate(CheckShutdown, r.name, err.Error())
	}
}
