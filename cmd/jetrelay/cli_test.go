package main

import (
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
		{[]string{"healthcheck", "--url", "http://127.0.0.1:1/readyz"}, 1, "no answer"},
		{[]string{"run", "stray-argument"}, 1, `unexpected argument "stray-argument"`},
	} {
		code, out := runBinary(t, nil, 10*time.Second, tc.args...)
		if code != tc.wantCode || !strings.Contains(out, tc.wantOut) {
			t.Errorf("jetrelay %s: exit %d, want %d with %q in:\n%s", strings.Join(tc.args, " "), code, tc.wantCode, tc.wantOut, out)
		}
	}
}
