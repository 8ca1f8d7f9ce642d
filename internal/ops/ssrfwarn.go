package ops

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/ssrf"
	"github.com/jetrelay/jetrelay/internal/store"
)

// SSRFWarning says, in one line, why `jetrelay run` (with the SSRF
// settings in getenv and the policy stored in Redis) would refuse to send
// to rawURL and which setting allows it; "" when it would send. A policy
// that cannot be read is reported too, since no delivery goes out then.
func SSRFWarning(ctx context.Context, rdb redis.UniversalClient, rawURL string, getenv func(string) string) string {
	cfg, err := config.Load("run", nil, getenv, io.Discard)
	if err != nil {
		return "warning: cannot check the URL against the SSRF policy: " + err.Error()
	}
	allow, err := cfg.SSRFAllowList()
	if err != nil {
		return "warning: cannot check the URL against the SSRF policy: " + err.Error()
	}
	g := ssrf.New(ssrf.Config{Source: ssrf.StoreSource(store.New(rdb)), AllowCIDRs: allow, AllowHTTP: cfg.SSRFAllowHTTP,
		Logger: slog.New(slog.DiscardHandler)})
	if err := g.Refresh(ctx); err != nil {
		return "warning: the SSRF policy cannot be read, so no delivery goes out until it is fixed: " + err.Error()
	}
	rs, err := g.Preflight(ctx, rawURL)
	if err != nil || len(rs) == 0 {
		return ""
	}
	reasons := make([]string, len(rs))
	allows := make([]string, len(rs))
	for i, r := range rs {
		reasons[i], allows[i] = r.Reason, r.Allow
	}
	return fmt.Sprintf("warning: jetrelay run will refuse to deliver to %s under the current SSRF policy (%s); to allow it, set %s",
		RedactURL(rawURL), strings.Join(reasons, "; "), strings.Join(allows, "; and "))
}
