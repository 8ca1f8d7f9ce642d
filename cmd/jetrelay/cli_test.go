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
		if !strings.Contains(out, "(env "+name+")") {
			t.Errorf("run --help does not list %s", name)
		}
	}
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
		{nil, 2, "name a command: run, demo, bench"},
		{[]string{"--help"}, 0, "Available Commands:"},
		{[]string{"run", "--help"}, 0, "--workers"},
		{[]string{"deliveries", "--help"}, 0, "requeue"},
		{[]string{"version"}, 0, "jetrelay "},
		{[]string{"--version"}, 0, "jetrelay "},
		{[]string{"healthcheck", "--url", "http://127.0.0.1:1/readyz"}, 1, "no answer"},
		{[]string{"run", "stray-argument"}, 2, `unexpected argument "stray-argument"`},
		{[]string{"deliveries", "lost"}, 2, `unknown subcommand "lost"`},
		{[]string{"deliveries", "inspect"}, 2, "want one delivery id"},
	} {
		code, out := runBinary(t, nil, 10*time.Second, tc.args...)
		if code != tc.wantCode || !strings.Contains(out, tc.wantOut) {
			t.Errorf("jetrelay %s: exit %d, want %d with %q in:\n%s", strings.Join(tc.args, " "), code, tc.wantCode, tc.wantOut, out)
		}
	}
}

// A usage error is one line naming what is wrong and a pointer to the
// command's --help, never the help itself (run's has one line per setting).
func TestCommandLine_UsageErrorIsOneLineAndAHint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args      []string
		wantError string
	}{
		{[]string{"run", "--workers", "abc"}, `jetrelay: invalid argument "abc" for "--workers" flag: not an integer: "abc"`},
		{[]string{"run", "--no-such-flag"}, "jetrelay: unknown flag: --no-such-flag"},
		{[]string{"status", "--management-urls"}, "jetrelay: flag needs an argument: --management-urls"},
		{[]string{"subscriptions", "set-status", "whsub_1"}, "jetrelay: subscriptions set-status: want ID and a status (got 1 arguments)"},
		{[]string{"inbox", "purge", "--older-than", "soon"}, `jetrelay: invalid argument "soon" for "--older-than" flag`},
		{[]string{"bench", "--scenario", "limits", "--for", "x"}, `jetrelay: invalid argument "x" for "--for" flag`},
	} {
		code, out := runBinary(t, nil, 10*time.Second, tc.args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		wantHint := "Run 'jetrelay " + tc.args[0]
		if code != 2 || len(lines) != 2 || !strings.HasPrefix(lines[0], tc.wantError) || !strings.HasPrefix(lines[1], wantHint) {
			t.Errorf("jetrelay %s: exit %d, want 2 with the line %q and a line %q...; got:\n%s", strings.Join(tc.args, " "), code, tc.wantError, wantHint, out)
		}
	}
}

// Flags may follow positional arguments: here --redis-url after the id
// decides which Redis the command fails to reach.
func TestCommandLine_FlagAfterPositionalArgumentIsAFlag(t *testing.T) {
	t.Parallel()
	env := map[string]string{"REDIS_HOST": "127.0.0.1", "REDIS_PORT": "2", "MANAGEMENT_PORT": "0"}
	for _, args := range [][]string{
		{"deliveries", "inspect", "whdel_1", "--redis-url", "redis://127.0.0.1:1/0"},
		{"subscriptions", "get", "whsub_1", "--redis-url", "redis://127.0.0.1:1/0"},
	} {
		code, out := runBinary(t, env, 20*time.Second, args...)
		if code != 1 || !strings.Contains(out, "127.0.0.1:1") || strings.Contains(out, "127.0.0.1:2") {
			t.Errorf("jetrelay %s: exit %d, want 1 with Redis 127.0.0.1:1 (the flag) unreachable, not 127.0.0.1:2 (the environment):\n%s", strings.Join(args, " "), code, out)
		}
	}
}

func TestCommandLine_CompletionPrintsAShellScript(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "__start_jetrelay", "zsh": "#compdef jetrelay", "fish": "complete -c jetrelay", "powershell": "Register-ArgumentCompleter"} {
		code, out := runBinary(t, nil, 10*time.Second, "completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("jetrelay completion %s: exit %d, want 0 with %q in:\n%.300s", shell, code, want, out)
		}
	}
}
