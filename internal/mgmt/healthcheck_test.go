package mgmt

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHealthcheck_PassesOnlyWhileReadyzIsUp(t *testing.T) {
	down := true
	srv := httptest.NewServer(Handler(map[string]Check{
		"redis": func(context.Context) error {
			if down {
				return errors.New("connection refused")
			}
			return nil
		},
	}, nil))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	env := func(k string) string {
		if k == "MANAGEMENT_PORT" {
			return port
		}
		return ""
	}
	ctx := context.Background()
	err := healthcheck(ctx, env)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("healthcheck with Redis down = %v, want an error with the 503 and the failing check", err)
	}
	down = false
	if err := healthcheck(ctx, env); err != nil {
		t.Errorf("healthcheck with every check up = %v, want nil", err)
	}
	if err := healthcheck(ctx, env, "--url", srv.URL+"/healthz"); err != nil {
		t.Errorf("healthcheck --url …/healthz = %v, want nil", err)
	}
}

func TestHealthcheck_FailsWhenNothingListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/readyz"
	ln.Close()
	err = Probe(context.Background(), url, time.Second)
	if err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("probe of a closed port = %v, want a no-answer error", err)
	}
}

func TestDefaultProbeURL_UsesLoopbackForWildcardHosts(t *testing.T) {
	for _, tc := range []struct{ host, port, want string }{
		{"", "", "http://127.0.0.1:9980/readyz"},
		{"0.0.0.0", "9981", "http://127.0.0.1:9981/readyz"},
		{"::1", "9980", "http://[::1]:9980/readyz"},
		{"10.1.2.3", "9980", "http://10.1.2.3:9980/readyz"},
	} {
		got := DefaultProbeURL(func(k string) string {
			switch k {
			case "MANAGEMENT_PORT":
				return tc.port
			case "JETRELAY_MANAGEMENT_HOST":
				return tc.host
			}
			return ""
		})
		if got != tc.want {
			t.Errorf("host %q port %q: %s, want %s", tc.host, tc.port, got, tc.want)
		}
	}
}

// healthcheck runs `jetrelay healthcheck args...` with env as the
// environment.
func healthcheck(ctx context.Context, env func(string) string, args ...string) error {
	cmd := HealthcheckCommand(env)
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return cmd.ExecuteContext(ctx)
}
