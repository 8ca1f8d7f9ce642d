package config

import (
	"strings"
	"testing"
)

func TestDescriptions_NameTheServersButNeverThePasswords(t *testing.T) {
	getenv := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	cases := []struct {
		name      string
		env       map[string]string
		redis     string
		natsMode  string
		forbidden string
	}{
		{"defaults", nil, "localhost:6379", "embedded JetStream (data dir jetrelay-data, in-process only)", ""},
		{"host and password", map[string]string{"REDIS_HOST": "cache.internal", "REDIS_PORT": "6380", "REDIS_PASSWORD": "hunter2"}, "cache.internal:6380", "embedded", "hunter2"},
		{"url with password and db", map[string]string{"REDIS_URL": "redis://:s3cret@10.0.0.5:6390/2", "NATS_URL": "nats://u:natspw@n1:4222,nats://n2:4222"}, "10.0.0.5:6390 db 2", "external NATS nats://n1:4222,nats://n2:4222", "pw"},
		{"embedded listener", map[string]string{"JETRELAY_NATS_LISTEN": "127.0.0.1:4223"}, "localhost:6379", "listening on 127.0.0.1:4223", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("run", nil, getenv(tc.env), new(strings.Builder))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.RedisAddress(); got != tc.redis {
				t.Errorf("RedisAddress() = %q, want %q", got, tc.redis)
			}
			mode := c.NATSMode()
			if !strings.Contains(mode, tc.natsMode) {
				t.Errorf("NATSMode() = %q, want it to contain %q", mode, tc.natsMode)
			}
			if tc.forbidden != "" && strings.Contains(c.RedisAddress()+mode, tc.forbidden) {
				t.Errorf("a password leaked: %q / %q", c.RedisAddress(), mode)
			}
		})
	}
}
