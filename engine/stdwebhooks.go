package engine

import (
	"strconv"
	"time"

	"github.com/jetrelay/jetrelay/internal/store"
	"github.com/jetrelay/jetrelay/proto"
	"github.com/jetrelay/jetrelay/transport"
)

// DefaultSecretRotationGrace is how long a subscription's previous signing
// secret keeps signing Standard Webhooks deliveries after admin replaced it,
// unless Config.SecretRotationGrace says otherwise.
const DefaultSecretRotationGrace = 24 * time.Hour

// standardWebhooks adds the Standard Webhooks headers to req when the
// subscription uses them (its own setting, else the fleet default), signed
// with the current secret and, during a rotation's grace period, the
// previous one too. X-Cycles-Signature is left exactly as it is: the
// current secret only, as the reference signs. Nothing is added to a
// delivery without a usable secret (one sent unsigned under
// AllowUnsigned): there is nothing to sign with.
func (e *Engine) standardWebhooks(h *handling, req *transport.Request, secret string) {
	on := e.cfg.StandardWebhooks
	if set := h.b.Settings; set != nil && set.StandardWebhooks != nil {
		on = *set.StandardWebhooks
	}
	if !on || !proto.SecretUsable(secret) {
		return
	}
	keys := [][]byte{proto.StandardWebhooksKey(secret)}
	if prev := e.previousSecret(h, secret); prev != "" {
		keys = append(keys, proto.StandardWebhooksKey(prev))
	}
	// The time of this attempt, not of the event: a receiver refuses
	// timestamps older than its tolerance, and a retry is not a replay.
	ts := time.Now().Unix()
	req.WebhookID = req.EventID
	req.WebhookTimestamp = strconv.FormatInt(ts, 10)
	req.WebhookSignature = proto.StandardWebhooksSignatures(keys, req.WebhookID, ts, req.Body)
}

// previousSecret is the subscription's previous signing secret (decrypted)
// while its grace period lasts, or "". It also notices a rotation: the
// settings record keeps a copy of webhook:secret:{id} as last seen, and
// when the stored secret differs from it, the copy becomes the previous
// secret, kept for Config.SecretRotationGrace. A previous secret past its
// grace is removed from the record. Neither secret is ever logged.
func (e *Engine) previousSecret(h *handling, current string) string {
	b := h.b
	if !b.HasSecret {
		return ""
	}
	set := b.Settings
	now := time.Now()
	if set == nil || set.Secret != b.Secret || (set.PreviousSecret != "" && !inGrace(set, now)) {
		updated, err := e.store.UpdateSettings(h.ctx, h.delivery().SubscriptionID, func(cur *proto.SubscriptionSettings) (store.Patch, error) {
			return rotationPatch(cur, b.Secret, now, e.cfg.SecretRotationGrace), nil
		})
		if err != nil {
			// This send goes out with the current secret's signature (as
			// X-Cycles-Signature always does); the next one tries again.
			h.log.Warn("could not record the subscription's secret rotation; signing with the current secret only", "error", err)
			return ""
		}
		set = updated
	}
	if set.PreviousSecret == "" || !inGrace(set, now) {
		return ""
	}
	prev, err := proto.DecryptSecret(e.cfg.SecretKey, set.PreviousSecret)
	if err != nil {
		h.log.Warn("previous signing secret cannot be decrypted; signing with the current secret only", "error", err)
		return ""
	}
	if prev == current || !proto.SecretUsable(prev) {
		return ""
	}
	return prev
}

func inGrace(set *proto.SubscriptionSettings, now time.Time) bool {
	return set.PreviousSecretUntil != nil && now.Before(set.PreviousSecretUntil.Time)
}

// rotationPatch brings a settings record up to date with the stored secret
// (its stored form, as admin wrote it): a new secret moves the last seen
// one to previous_secret for grace (replacing an older previous one); an
// expired previous secret is removed. It is computed again on a conflict,
// so two replicas noticing the same rotation write it once.
func rotationPatch(cur *proto.SubscriptionSettings, stored string, now time.Time, grace time.Duration) store.Patch {
	var p store.Patch
	switch {
	case cur.Secret != stored && cur.Secret != "":
		p = store.Patch{{Name: "secret", Value: stored}, {Name: "previous_secret", Value: cur.Secret},
			{Name: "previous_secret_until", Value: now.Add(grace)}}
	case cur.Secret != stored:
		p = store.Patch{{Name: "secret", Value: stored}}
	case cur.PreviousSecret != "" && !inGrace(cur, now):
		p = store.Patch{{Name: "previous_secret", Value: nil}, {Name: "previous_secret_until", Value: nil}}
	}
	return p
}
