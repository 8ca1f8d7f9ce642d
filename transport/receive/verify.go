package receive

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"time"

	"github.com/jetrelay/jetrelay/proto"
)

var (
	// ErrNoSignature means the delivery carried no X-Cycles-Signature.
	ErrNoSignature = errors.New("receive: no X-Cycles-Signature")
	// ErrBadSignature means X-Cycles-Signature matched none of the secrets.
	ErrBadSignature = errors.New("receive: X-Cycles-Signature does not match the body")
	// ErrNoEventID means the delivery carried no usable X-Cycles-Event-Id.
	ErrNoEventID = errors.New("receive: no X-Cycles-Event-Id")
)

// Verifier checks X-Cycles-Signature, and Standard Webhooks signatures
// (webhook-signature, with replay protection by webhook-timestamp), against
// a subscription's signing secrets. It is safe for concurrent use.
type Verifier struct {
	secrets []string
	maxBody int64
	// Standard Webhooks: the key of each secret, the timestamp tolerance,
	// the clock, and whether X-Cycles-Signature alone is refused.
	keys         [][]byte
	tolerance    time.Duration
	now          func() time.Time
	standardOnly bool
}

// DefaultMaxBodyBytes bounds the body the HTTP middleware reads. Cycles
// events are a few kilobytes; a megabyte leaves room without letting a
// client make the receiver buffer an unbounded body.
const DefaultMaxBodyBytes = 1 << 20

// VerifierOption configures a Verifier.
type VerifierOption func(*Verifier)

// WithMaxBodyBytes sets the largest body the HTTP middleware accepts; a
// larger one is answered 413. n <= 0 keeps DefaultMaxBodyBytes.
func WithMaxBodyBytes(n int64) VerifierOption {
	return func(v *Verifier) {
		if n > 0 {
			v.maxBody = n
		}
	}
}

// NewVerifier returns a Verifier that accepts a signature made with any of
// secrets, so the old and the new secret both verify during a rotation. A
// blank secret is refused: the sender does not sign with one (it sends no
// signature), so accepting it would accept anything.
func NewVerifier(secrets []string, opts ...VerifierOption) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("receive: at least one signing secret is needed")
	}
	for i, s := range secrets {
		if !proto.SecretUsable(s) {
			return nil, fmt.Errorf("receive: signing secret %d is blank", i+1)
		}
	}
	v := &Verifier{secrets: append([]string(nil), secrets...), maxBody: DefaultMaxBodyBytes,
		tolerance: proto.StandardWebhooksTolerance, now: time.Now}
	for _, s := range secrets {
		v.keys = append(v.keys, proto.StandardWebhooksKey(s))
	}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

// Verify reports whether signature (the X-Cycles-Signature value) was made
// over body with one of the secrets: nil, ErrNoSignature or ErrBadSignature.
// Every secret is compared, in constant time each, whatever matches first,
// so the time taken says nothing about the signature or which secret it
// used.
func (v *Verifier) Verify(body []byte, signature string) error {
	if signature == "" {
		return ErrNoSignature
	}
	ok := 0
	for _, s := range v.secrets {
		if hmac.Equal([]byte(proto.Sign(s, body)), []byte(signature)) {
			ok = 1
		}
	}
	if ok == 0 {
		return ErrBadSignature
	}
	return nil
}
