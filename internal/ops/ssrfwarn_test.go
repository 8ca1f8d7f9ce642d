package ops_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/internal/ops"
	"github.com/jetrelay/jetrelay/internal/store"
)

func TestSSRFWarning_NamesTheSettingUnderRunsPolicyAndIsSilentWhenAllowed(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	url := "http://127.0.0.1:9099/hooks"

	w := ops.SSRFWarning(ctx, e.redis.Client, url, env(nil))
	if !strings.Contains(w, "HTTPS required") || !strings.Contains(w, "JETRELAY_SSRF_ALLOW_HTTP=true") ||
		!strings.Contains(w, "JETRELAY_SSRF_ALLOW_CIDRS=127.0.0.1/32") {
		t.Fatalf("plain http on loopback: %q; want both blocking settings named at once", w)
	}
	w = ops.SSRFWarning(ctx, e.redis.Client, url, env(map[string]string{"JETRELAY_SSRF_ALLOW_HTTP": "true"}))
	if !strings.Contains(w, "blocked IP 127.0.0.1") || !strings.Contains(w, "JETRELAY_SSRF_ALLOW_CIDRS=127.0.0.1/32") {
		t.Fatalf("loopback: %q", w)
	}
	if w := ops.SSRFWarning(ctx, e.redis.Client, url, env(map[string]string{"JETRELAY_SSRF_ALLOW_HTTP": "true", "JETRELAY_SSRF_ALLOW_CIDRS": "127.0.0.1/32"})); w != "" {
		t.Fatalf("allowed URL warned: %q", w)
	}
	// admin's stored policy counts too: here it allows http and loopback.
	if err := e.redis.Client.Set(ctx, store.SecurityConfigKey, `{"blocked_cidr_ranges":[],"allow_http":true}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if w := ops.SSRFWarning(ctx, e.redis.Client, url, env(nil)); w != "" {
		t.Fatalf("URL allowed by config:webhook-security warned: %q", w)
	}
}
