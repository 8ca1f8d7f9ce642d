package receive

import (
	"errors"
	"fmt"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

// ErrReplay means a Standard Webhooks delivery's webhook-timestamp is
// missing, malformed, or further from the receiver's clock than the
// tolerance (WithTolerance, 5 minutes by default): a captured request
// played again, or a clock badly off. It also matches ErrBadSignature.
var ErrReplay = fmt.Errorf("%w: webhook-timestamp outside the tolerance (a replay?)", ErrBadSignature)

// ErrCyclesSignatureRefused means a delivery carried only X-Cycles-Signature
// to a Verifier that requires Standard Webhooks (WithStandardWebhooksOnly).
// It also matches ErrNoSignature.
var ErrCyclesSignatureRefused = fmt.Errorf("%w: Standard Webhooks required, only X-Cycles-Signature sent", ErrNoSignature)

// WithTolerance sets how far webhook-timestamp may be from the receiver's
// clock, either way; d <= 0 keeps proto.StandardWebhooksTolerance (5
// minutes, the specification's default).
func WithTolerance(d time.Duration) VerifierOption {
	return func(v *Verifier) {
		if d > 0 {
			v.tolerance = d
		}
	}
}

// WithClock sets the clock webhook-timestamp is checked against (tests;
// default time.Now).
func WithClock(now func() time.Time) VerifierOption {
	return func(v *Verifier) {
		if now != nil {
			v.now = now
		}
	}
}

// WithStandardWebhooksOnly refuses deliveries that carry X-Cycles-Signature
// alone, the last step of a migration (docs/receiving.md): X-Cycles-Signature
// has no timestamp, so while it is accepted, a captured request stripped of
// its Standard Webhooks headers can be replayed.
func WithStandardWebhooksOnly() VerifierOption {
	return func(v *Verifier) { v.standardOnly = true }
}

// VerifyStandardWebhooks checks the Standard Webhooks headers of a delivery
// (webhook-id, webhook-timestamp, webhook-signature) against the secrets:
// the key of each is proto.StandardWebhooksKey (the base64 after "whsec_",
// else the secret's own bytes), so the secret is given exactly as admin
// returned it. It returns nil, ErrNoSignature (a header missing), ErrReplay
// or ErrBadSignature.
func (v *Verifier) VerifyStandardWebhooks(body []byte, id, timestamp, signature string) error {
	err := proto.VerifyStandardWebhooks(v.keys, id, timestamp, signature, body, v.now(), v.tolerance)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, proto.ErrWebhookHeadersMissing):
		return fmt.Errorf("%w: %w", ErrNoSignature, err)
	case errors.Is(err, proto.ErrWebhookTimestamp):
		return ErrReplay
	}
	return fmt.Errorf("%w: %w", ErrBadSignature, err)
}

// VerifyIdentity checks whichever scheme a delivery carries: Standard
// Webhooks when webhook-signature is present (then it alone decides, so a
// stale timestamp is refused even though X-Cycles-Signature, which has
// none, would still match), else X-Cycles-Signature (unless
// WithStandardWebhooksOnly). That is what lets a receiver accept both while
// its senders move from one to the other.
func (v *Verifier) VerifyIdentity(body []byte, id Identity) error {
	if id.WebhookSignature != "" {
		return v.VerifyStandardWebhooks(body, id.WebhookID, id.WebhookTimestamp, id.WebhookSignature)
	}
	if v.standardOnly {
		if id.Signature != "" {
			return ErrCyclesSignatureRefused
		}
		return fmt.Errorf("%w: no webhook-signature", ErrNoSignature)
	}
	return v.Verify(body, id.Signature)
}
