package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRunHelp_ListsEverySetting(t *testing.T) {
	t.Parallel()
	code, out := runBinary(t, nil, 10*time.Second, "run", "--help")
	if code != 0 {
		t.Fatalf("jetrelay run --help exited %d, want 0; output:\n%s", code, out)
	}
	for _, name := range []string{
		"REDIS_HOST", "REDIS_PORT", "REDIS_PASSWORD", "REDIS_URL", "NATS_URL", "WEBHOOK_SECRET_ENCRYPTION_KEY",
		"MAX_DELIVERY_AGE_MS", "EVENT_TTL_DAYS", "DELIVERY_TTL_DAYS", "MANAGEMENT_PORT",
		"JETRELAY_ROLE", "JETRELAY_DATA_DIR", "JETRELAY_NATS_LISTEN", "JETRELAY_STREAM", "JETRELAY_SUBJECT",
		"JETRELAY_CONSUMER", "JETRELAY_STREAM_REPLICAS", "JETRELAY_ACK_WAIT", "JETRELAY_MAX_ACK_PENDING",
		"JETRELAY_WORKERS", "JETRELAY_DRAIN_TIMEOUT", "JETRELAY_HTTP_CONNECT_TIMEOUT", "JETRELAY_HTTP_REQUEST_TIMEOUT",
		"JETRELAY_USER_AGENT", "JETRELAY_BRIDGE_ID", "JETRELAY_MANAGEMENT_HOST", "JETRELAY_LOG_FORMAT", "JETRELAY_LOG_LEVEL",
	} {
		if !containsWord(out, name) {
			t.Errorf("run --help does not list %s", name)
		}
	}
}

// containsWord reports whether s holds name as a whole word, so that
// JETRELAY_STREAM is not found inside JETRELAY_STREAM_REPLICAS.
func containsWord(s, name string) bool {
	for _, f := range strings.Fields(s) {
		if f == name {
			return true
		}
	}
	return false
}

func TestRun_BadSettingExitsNamingTheVariableWithoutEchoingSecrets(t *testing.T) {
	t.Parallel()
	const redisPassword = "sekrit-redis-pw"
	for _, tc := range []struct {
		name, env, value string
		secret           bool // the value must not appear in the output
	}{
		{"workers not a number", "JETRELAY_WORKERS", "abc", false},
		{"key not base64", "WEBHOOK_SECRET_ENCRYPTION_KEY", "sekrit-key-not-base64!", true},
		{"key of 16 bytes", "WEBHOOK_SECRET_ENCRYPTION_KEY", "c2Vrcml0LTE2LWJ5dGVzIQ==", true},
		{"redis url with a bad port", "REDIS_URL", "redis://:sekrit-url-pw@127.0.0.1:notaport/0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{
				"REDIS_HOST": "127.0.0.1", "REDIS_PORT": "1", "REDIS_PASSWORD": redisPassword,
				"NATS_URL": "nats://127.0.0.1:1", "MANAGEMENT_PORT": "0", "JETRELAY_DATA_DIR": t.TempDir(),
				tc.env: tc.value,
			}
			code, out := runBinary(t, env, 15*time.Second, "run")
			if code != 1 {
				t.Errorf("exit code %d, want 1 (a configuration error)", code)
			}
			if !strings.Contains(out, tc.env) {
				t.Errorf("output does not name %s:\n%s", tc.env, out)
			}
			if strings.Contains(out, "panic:") {
				t.Errorf("jetrelay panicked instead of reporting the setting:\n%s", out)
			}
			if strings.Contains(out, redisPassword) {
				t.Errorf("output echoes REDIS_PASSWORD:\n%s", out)
			}
			if tc.secret && strings.Contains(out, tc.value) {
				t.Errorf("output echoes the secret value of %s:\n%s", tc.env, out)
			}
			if tc.secret && strings.Contains(out, "sekrit") {
				t.Errorf("output echoes part of the secret value of %s:\n%s", tc.env, out)
			}
		})
	}
}

func TestCommandLine_UsageErrorsExit2AndHelpExits0(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantOut  string
	}{
		{[]string{"deliver-everything"}, 2, `unknown command "deliver-everything"`},
		{nil, 2, "Commands:"},
		{[]string{"--help"}, 0, "Commands:"},
		{[]string{"version"}, 0, "jetrelay "},
		{[]string{"run", "stray-argument"}, 1, `unexpected argument "stray-argument"`},
	} {
		code, out := runBinary(t, nil, 10*time.Second, tc.args...)
		if code != tc.wantCode || !strings.Contains(out, tc.wantOut) {
			t.Errorf("jetrelay %s: exit %d, want %d with %q in:\n%s", strings.Join(tc.args, " "), code, tc.wantCode, tc.wantOut, out)
		}
	}
}

func TestDemo_ShowsSuccessRetryAndFailure(t *testing.T) {
	t.Parallel()
	code, out := runBinary(t, nil, 90*time.Second, "demo", "--events", "5", "--timeout", "60s")
	if code != 0 {
		t.Fatalf("jetrelay demo exited %d, want 0; output:\n%s", code, out)
	}
	rows := summaryRows(t, out)
	healthy, flaky, dead := rows["healthy"], rows["flaky"], rows["dead"]
	if healthy.deliveries != 5 || healthy.success != 5 || !strings.Contains(healthy.receiver, "5 / 0 / 0") || !strings.Contains(healthy.status, "ACTIVE") {
		t.Errorf("healthy row %+v: want 5 delivered once each, correctly signed, subscription ACTIVE", healthy)
	}
	if flaky.deliveries != 5 || flaky.success != 5 || flaky.sends <= flaky.deliveries || !strings.Contains(flaky.status, "ACTIVE") {
		t.Errorf("flaky row %+v: want all 5 delivered after retries, subscription ACTIVE", flaky)
	}
	// The dead subscription is disabled once 3 deliveries failed (sends
	// already in flight may fail a few more); admin queues nothing for it
	// after that, and what was queued waits (held).
	if dead.failed < 3 || dead.success != 0 || dead.failed+dead.held != dead.deliveries || !strings.Contains(dead.status, "DISABLED") {
		t.Errorf("dead row %+v: want at least 3 failed, the rest held, subscription DISABLED", dead)
	}
	if !strings.Contains(out, "HELD") {
		t.Errorf("summary does not explain held deliveries:\n%s", out)
	}
}

// demoRow is one line of the demo's summary table.
type demoRow struct {
	deliveries, success, failed, held, sends int
	receiver, status                         string
}

// summaryRows parses the table after the SUBSCRIPTION header: name, five
// counts, the receiver column, then the subscription status (two words).
func summaryRows(t *testing.T, out string) map[string]demoRow {
	t.Helper()
	_, table, ok := strings.Cut(out, "SUBSCRIPTION")
	if !ok {
		t.Fatalf("demo output has no summary table:\n%s", out)
	}
	rows := map[string]demoRow{}
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			break
		}
		var n [5]int
		for i := range n {
			v, err := strconv.Atoi(f[i+1])
			if err != nil {
				t.Fatalf("summary row %q: column %d is not a count", line, i+2)
			}
			n[i] = v
		}
		rows[f[0]] = demoRow{
			deliveries: n[0], success: n[1], failed: n[2], held: n[3], sends: n[4],
			receiver: strings.Join(f[6:len(f)-2], " "), status: strings.Join(f[len(f)-2:], " "),
		}
	}
	return rows
}
