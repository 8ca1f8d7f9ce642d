package ssrf

import (
	"context"
	"errors"
	"fmt"

	"github.com/jetrelay/jetrelay/internal/store"
)

// StoreSource reads config:webhook-security through st for a Guard: absent
// means the defaults, unreadable means no policy (ErrUnusable). `jetrelay
// run` and the operator tools' SSRF warning read the policy the same way.
func StoreSource(st *store.Store) Source {
	return func(ctx context.Context) ([]byte, bool, error) {
		raw, err := st.WebhookSecurity(ctx)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, false, nil
		case errors.Is(err, store.ErrCorrupt):
			return nil, true, fmt.Errorf("%w: %w", ErrUnusable, err)
		case err != nil:
			return nil, false, err
		}
		return raw, true, nil
	}
}
