package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jetrelay/jetrelay/internal/config"
	"github.com/jetrelay/jetrelay/internal/ssrf"
	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
)

// newGuard builds the SSRF guard for the webhook transport: the policy comes
// from config:webhook-security in Redis, the allow-list and http override
// from the operator's settings. The first load is attempted here; until one
// succeeds, sends wait (retryably) rather than go out unchecked.
func newGuard(ctx context.Context, cfg *config.Config, st *store.Store, log *slog.Logger) (*ssrf.Guard, error) {
	allow, err := cfg.SSRFAllowList()
	if err != nil {
		return nil, err
	}
	g := ssrf.New(ssrf.Config{
		Source:     ssrf.StoreSource(st),
		AllowCIDRs: allow,
		AllowHTTP:  cfg.SSRFAllowHTTP,
		Logger:     log,
	})
	if len(allow) > 0 || cfg.SSRFAllowHTTP {
		log.Warn("SSRF operator overrides in force", "allow_cidrs", cfg.SSRFAllowCIDRs, "allow_http", cfg.SSRFAllowHTTP)
	}
	if err := g.Refresh(ctx); err != nil {
		log.Warn("SSRF policy not loaded yet; deliveries wait until it is", "err", err)
	}
	return g, nil
}

// errKeyMismatch marks a start-up key check that failed on the key, not on
// Redis: retrying cannot help.
var errKeyMismatch = errors.New("encryption key does not fit the stored signing secrets")

// secretSample is how many stored signing secrets start-up checks against
// the encryption key.
const secretSample = 100

// checkSecretKey fails start-up when stored signing secrets are encrypted
// and the configured key is missing or decrypts none of a sample of them:
// every signed delivery would otherwise wait for a key that never comes.
// Plaintext secrets need no key. Errors name a key, never a secret.
func checkSecretKey(ctx context.Context, st *store.Store, key *proto.SecretKey, log *slog.Logger) error {
	samples, err := st.SampleSecrets(ctx, secretSample)
	if err != nil {
		return err
	}
	var encrypted, opened int
	var firstBad string
	for _, s := range samples {
		if !strings.HasPrefix(s.Stored, "enc:") {
			continue
		}
		encrypted++
		if key == nil {
			return fmt.Errorf("%w: signing secrets in Redis are encrypted (e.g. %s) but WEBHOOK_SECRET_ENCRYPTION_KEY is not set: set it to the key admin uses", errKeyMismatch, s.Key)
		}
		if _, err := key.Decrypt(s.Stored); err == nil {
			opened++
		} else if firstBad == "" {
			firstBad = s.Key
		}
	}
	switch {
	case encrypted > 0 && opened == 0:
		return fmt.Errorf("%w: WEBHOOK_SECRET_ENCRYPTION_KEY decrypts none of the %d encrypted signing secrets sampled (e.g. %s): it is not the key admin uses", errKeyMismatch, encrypted, firstBad)
	case opened < encrypted:
		log.Warn("some encrypted signing secrets cannot be decrypted with WEBHOOK_SECRET_ENCRYPTION_KEY; their deliveries will wait, never go unsigned",
			"sampled", encrypted, "undecryptable", encrypted-opened, "example_key", firstBad)
	}
	return nil
}
