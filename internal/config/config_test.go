package config

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// envOf turns pairs into a getenv.
func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestLoad_FlagBeatsEnvironmentBeatsDefault(t *testing.T) {
	c, err := Load("run", []string{"--workers", "7"}, envOf("JETRELAY_WORKERS", "3", "JETRELAY_ACK_WAIT", "5s"), io.Discard)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Workers != 7 {
		t.Errorf("workers %d, want the flag's 7 over the environment's 3", c.Workers)
	}
	if c.AckWait != 5*time.Second {
		t.Errorf("ack wait %s, want the environment's 5s over the default", c.AckWait)
	}
	if c.DrainTimeout != 25*time.Second || c.MaxDeliveryAge != 24*time.Hour || c.EventTTL != 90*24*time.Hour {
		t.Errorf("defaults: drain %s, max delivery age %s, event TTL %s; want 25s, 24h, 90 days", c.DrainTimeout, c.MaxDeliveryAge, c.EventTTL)
	}
	if c.BridgeID == "" {
		t.Error("bridge id left empty; want the host name so a restart finds its processing list")
	}
}

func TestLoad_InactiveRecheckDefaultsToFiveSecondsAndFollowsTheEnvironment(t *testing.T) {
	c, err := Load("run", nil, envOf(), io.Discard)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.InactiveRecheck != 5*time.Second {
		t.Errorf("inactive recheck %s by default, want 5s (the engine's default)", c.InactiveRecheck)
	}
	c, err = Load("run", nil, envOf("JETRELAY_INACTIVE_RECHECK", "1s"), io.Discard)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.InactiveRecheck != time.Second {
		t.Errorf("inactive recheck %s, want the environment's 1s", c.InactiveRecheck)
	}
}

func TestLoad_BadValueNamesTheVariable(t *testing.T) {
	for _, tc := range []struct{ env, value string }{
		{"JETRELAY_WORKERS", "abc"},
		{"JETRELAY_ACK_WAIT", "fast"},
		{"MAX_DELIVERY_AGE_MS", "-1"},
		{"EVENT_TTL_DAYS", "0"},
		{"DELIVERY_TTL_DAYS", "forever"},
		{"MANAGEMENT_PORT", "http"},
		// Values that parse but are out of range must name the variable too:
		// the operator set an environment variable, not a Go field.
		{"JETRELAY_WORKERS", "0"},
		{"JETRELAY_ACK_WAIT", "10ms"},
		{"JETRELAY_ROLE", "boss"},
		{"JETRELAY_LOG_FORMAT", "xml"},
		{"MANAGEMENT_PORT", "70000"},
		{"JETRELAY_INACTIVE_RECHECK", "0s"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			_, err := Load("run", nil, envOf(tc.env, tc.value), io.Discard)
			if err == nil {
				t.Fatalf("Load accepted %s=%s", tc.env, tc.value)
			}
			if !strings.Contains(err.Error(), tc.env) {
				t.Errorf("error %q does not name %s", err, tc.env)
			}
		})
	}
}

func TestLoad_RedisURLErrorNeverEchoesThePassword(t *testing.T) {
	const pw = "sekrit-url-pw"
	for _, u := range []string{
		"redis://:" + pw + "@127.0.0.1:notaport/0",
		"redis://:" + pw + "@127.0.0.1:6379/notadb",
		"http://:" + pw + "@127.0.0.1:6379",
		"redis://:" + pw + "@[::1/0",
		"redis://:" + pw + "@127.0.0.1:6379/0?dial_timeout=soon",
	} {
		_, err := Load("run", nil, envOf("REDIS_URL", u), io.Discard)
		if err == nil {
			t.Errorf("Load accepted REDIS_URL %q", u)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("error for a malformed REDIS_URL echoes its password: %v", err)
		}
		if !strings.Contains(err.Error(), "REDIS_URL") {
			t.Errorf("error %q does not name REDIS_URL", err)
		}
	}
}

func TestLoad_HelpPrintsEverySettingAndReturnsErrHelp(t *testing.T) {
	var out bytes.Buffer
	_, err := Load("run", []string{"--help"}, envOf(), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Load --help returned %v, want flag.ErrHelp", err)
	}
	for _, o := range options() {
		if !strings.Contains(out.String(), " "+o.env+" ") || !strings.Contains(out.String(), "--"+o.flag+" ") {
			t.Errorf("help does not list --%s / %s", o.flag, o.env)
		}
	}
}

func TestLoad_ABadFlagValueIsOneClearErrorNotTheWholeHelp(t *testing.T) {
	var out bytes.Buffer
	_, err := Load("run", []string{"--workers", "abc"}, envOf(), &out)
	if err == nil || !strings.Contains(err.Error(), `invalid argument "abc" for "--workers" flag`) || !strings.Contains(err.Error(), "jetrelay run --help") {
		t.Fatalf("err = %v, want the bad value named and a pointer to --help", err)
	}
	if out.Len() != 0 {
		t.Fatalf("a bad flag printed %d bytes of help; the error alone must say what is wrong:\n%s", out.Len(), out.String())
	}
}

func TestRedisOptions_URLOverridesHostPortPassword(t *testing.T) {
	for _, tc := range []struct {
		name         string
		env          []string
		addr, passwd string
		db           int
	}{
		{"host, port and password", []string{"REDIS_HOST", "redis.internal", "REDIS_PORT", "6380", "REDIS_PASSWORD", "pw"}, "redis.internal:6380", "pw", 0},
		{"url wins", []string{"REDIS_HOST", "ignored", "REDIS_URL", "redis://:urlpw@10.0.0.5:6390/2"}, "10.0.0.5:6390", "urlpw", 2},
		{"defaults", nil, "localhost:6379", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("run", nil, envOf(tc.env...), io.Discard)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			o, err := c.RedisOptions()
			if err != nil {
				t.Fatalf("RedisOptions: %v", err)
			}
			if o.Addr != tc.addr || o.Password != tc.passwd || o.DB != tc.db {
				t.Errorf("addr %q password %q db %d; want %q %q %d", o.Addr, o.Password, o.DB, tc.addr, tc.passwd, tc.db)
			}
		})
	}
}

func TestLoad_SQSEndpointMustBeAnHTTPURLAndIsNeverEchoed(t *testing.T) {
	const pw = "sqs-endpoint-pw"
	for _, tc := range []struct {
		name, value string
		ok          bool
	}{
		{"empty means AWS", "", true},
		{"local server", "http://127.0.0.1:4566", true},
		{"https", "https://sqs.internal:443", true},
		{"credentials", "http://user:" + pw + "@127.0.0.1:4566", false},
		{"credentials in a URL that does not parse", "http://user:" + pw + "@[::1:4566", false},
		{"wrong scheme", "sqs://127.0.0.1:4566", false},
		{"no host", "http:///path", false},
		{"query", "http://127.0.0.1:4566/?token=" + pw, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("run", nil, envOf("JETRELAY_SQS_ENDPOINT", tc.value), io.Discard)
			if tc.ok {
				if err != nil {
					t.Fatalf("Load refused %q: %v", tc.value, err)
				}
				if got := c.Getenv("JETRELAY_SQS_ENDPOINT"); got != tc.value {
					t.Errorf("JETRELAY_SQS_ENDPOINT %q, want %q", got, tc.value)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load accepted JETRELAY_SQS_ENDPOINT %q", tc.value)
			}
			if !strings.Contains(err.Error(), "JETRELAY_SQS_ENDPOINT") {
				t.Errorf("error %q does not name JETRELAY_SQS_ENDPOINT", err)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("error echoes the endpoint's secret: %v", err)
			}
		})
	}
}

func TestLoad_SQSRegionMustLookLikeARegion(t *testing.T) {
	if _, err := Load("run", nil, envOf("JETRELAY_SQS_REGION", "eu-west-1"), io.Discard); err != nil {
		t.Errorf("Load refused eu-west-1: %v", err)
	}
	_, err := Load("run", nil, envOf("JETRELAY_SQS_REGION", "eu west\n1"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "JETRELAY_SQS_REGION") {
		t.Errorf("Load of a malformed region returned %v, want an error naming JETRELAY_SQS_REGION", err)
	}
}

func TestGetenv_AnswersLoadedSettingsThenTheEnvironment(t *testing.T) {
	c, err := Load("run", []string{"--sqs-region", "eu-west-1"},
		envOf("JETRELAY_SQS_REGION", "us-east-1", "AWS_ACCESS_KEY_ID", "AKID", "JETRELAY_SQS_ENDPOINT", "http://127.0.0.1:4566"), io.Discard)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for key, want := range map[string]string{
		"JETRELAY_SQS_REGION":   "eu-west-1", // the flag, not the environment
		"JETRELAY_SQS_ENDPOINT": "http://127.0.0.1:4566",
		"JETRELAY_WORKERS":      "4096", // a default
		"AWS_ACCESS_KEY_ID":     "AKID",
		"AWS_SECRET_ACCESS_KEY": "",
	} {
		if got := c.Getenv(key); got != want {
			t.Errorf("Getenv(%s) = %q, want %q", key, got, want)
		}
	}
}

func TestLoad_WithoutEncryptionKeyRefusesToStartOnlyWhenPlaintextIsDisallowed(t *testing.T) {
	if _, err := Load("run", nil, envOf(), io.Discard); err != nil {
		t.Errorf("default (plaintext allowed) without a key: %v", err)
	}
	_, err := Load("run", nil, envOf("WEBHOOK_SECRET_ALLOW_PLAINTEXT", "false"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "WEBHOOK_SECRET_ENCRYPTION_KEY") || !strings.Contains(err.Error(), "WEBHOOK_SECRET_ALLOW_PLAINTEXT") {
		t.Errorf("err = %v, want a refusal naming both settings (upstream 0.1.25.24)", err)
	}
	if _, err := Load("run", nil, envOf("WEBHOOK_SECRET_ALLOW_PLAINTEXT", "false", "WEBHOOK_SECRET_ENCRYPTION_KEY", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="), io.Discard); err != nil {
		t.Errorf("with a key: %v", err)
	}
}
