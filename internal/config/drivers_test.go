package config

import (
	"bytes"
	"io"
	"strings"
	"testing"

	// The built-in transports, as the binary compiles them in: their
	// settings are part of `run`'s.
	_ "github.com/jetrelay/jetrelay/transport/natsink"
	_ "github.com/jetrelay/jetrelay/transport/sqs"
	_ "github.com/jetrelay/jetrelay/transport/webhook"
)

func TestUsage_ListsTheTransportDriversSettingsWithJetrelaysOwn(t *testing.T) {
	var out bytes.Buffer
	Usage(&out, "run")
	for _, want := range []string{"--sqs-endpoint", "JETRELAY_SQS_REGION", "--http-request-timeout", "JETRELAY_USER_AGENT", "--ssrf-allow-cidrs"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run --help lacks %s:\n%s", want, out.String())
		}
	}
}

func TestLoad_ADriverSettingThatDoesNotParseFailsStartUpNamingIt(t *testing.T) {
	_, err := Load("run", []string{"--http-connect-timeout", "soon"}, envOf(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "JETRELAY_HTTP_CONNECT_TIMEOUT") {
		t.Errorf("Load with --http-connect-timeout soon = %v, want an error naming JETRELAY_HTTP_CONNECT_TIMEOUT", err)
	}
}
