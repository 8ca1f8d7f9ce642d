package proto

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// encryptedPrefix marks a webhook:secret:{id} value that admin encrypted.
const encryptedPrefix = "enc:"

// AES-GCM parameters of the stored format, fixed by admin: a 12-byte IV in
// front of the ciphertext and a 16-byte tag behind it, no additional data.
const (
	secretKeyBytes = 32
	secretIVBytes  = 12
	secretTagBytes = 16
)

// Errors of DecryptSecret. Both mean "a secret exists but cannot be used":
// the delivery must not be sent unsigned (the reference did, §8 #14).
var (
	// ErrSecretKeyMissing means the stored secret is encrypted and no
	// encryption key (WEBHOOK_SECRET_ENCRYPTION_KEY) is configured.
	ErrSecretKeyMissing = errors.New("proto: signing secret is encrypted but no encryption key is configured")
	// ErrSecretUndecryptable means the stored secret is encrypted but is not
	// valid base64, is too short, or fails authentication (usually: it was
	// encrypted with another key).
	ErrSecretUndecryptable = errors.New("proto: signing secret cannot be decrypted")
)

// SecretKey is the AES-256 key admin, the runtime and the events service
// share for webhook:secret:{id} values. It never prints its bytes.
type SecretKey struct {
	aead cipher.AEAD
}

// ParseSecretKey reads WEBHOOK_SECRET_ENCRYPTION_KEY as Java's
// Base64.getDecoder() does (standard alphabet, padding optional, no
// whitespace). It must decode to exactly 32 bytes. Errors never quote the
// key.
func ParseSecretKey(b64 string) (*SecretKey, error) {
	raw, err := decodeJavaBase64(b64)
	if err != nil {
		return nil, fmt.Errorf("proto: encryption key is not valid base64: %w", err)
	}
	// The cipher keeps its own key schedule; the decoded bytes are wiped.
	defer clear(raw)
	if len(raw) != secretKeyBytes {
		return nil, fmt.Errorf("proto: encryption key must be 32 bytes (256 bits), got %d", len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("proto: encryption key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("proto: encryption key: %w", err)
	}
	return &SecretKey{aead: aead}, nil
}

// String keeps the key out of logs and error messages that format it.
func (k *SecretKey) String() string { return "proto.SecretKey(redacted)" }

// GoString keeps the key out of %#v output.
func (k *SecretKey) GoString() string { return k.String() }

// Decrypt returns the plaintext signing secret for a stored
// webhook:secret:{id} value. A value without the "enc:" prefix is a legacy
// plaintext secret and is returned as is, so a nil key is fine for it. An
// encrypted value fails closed with an error wrapping ErrSecretKeyMissing
// (nil key) or ErrSecretUndecryptable; the error never contains the value.
func (k *SecretKey) Decrypt(stored string) (string, error) {
	payload, ok := strings.CutPrefix(stored, encryptedPrefix)
	if !ok {
		return stored, nil
	}
	if k == nil {
		return "", fmt.Errorf("%w (set WEBHOOK_SECRET_ENCRYPTION_KEY)", ErrSecretKeyMissing)
	}
	raw, err := decodeJavaBase64(payload)
	if err != nil {
		return "", fmt.Errorf("%w: value is not valid base64", ErrSecretUndecryptable)
	}
	if len(raw) < secretIVBytes+secretTagBytes {
		return "", fmt.Errorf("%w: value is %d bytes, shorter than IV and tag", ErrSecretUndecryptable, len(raw))
	}
	plain, err := k.aead.Open(nil, raw[:secretIVBytes], raw[secretIVBytes:], nil)
	if err != nil {
		return "", fmt.Errorf("%w: authentication failed (wrong key or corrupted value)", ErrSecretUndecryptable)
	}
	return string(plain), nil
}

// DecryptSecret is k.Decrypt(stored); it reads better where the key may be
// nil because none is configured.
func DecryptSecret(k *SecretKey, stored string) (string, error) { return k.Decrypt(stored) }

// Encrypt returns the stored form of plain, "enc:" + base64(IV ‖ ciphertext
// ‖ tag) with a fresh random IV, exactly as admin writes it.
func (k *SecretKey) Encrypt(plain string) (string, error) {
	if k == nil {
		return "", fmt.Errorf("%w: nothing to encrypt with", ErrSecretKeyMissing)
	}
	var iv [secretIVBytes]byte
	// crypto/rand.Read never fails (it aborts the program instead).
	_, _ = rand.Read(iv[:])
	return k.encryptWithIV(iv, plain), nil
}

// encryptWithIV is Encrypt with a chosen IV, so tests can reproduce the
// contract's vector. An IV must never be reused with the same key.
func (k *SecretKey) encryptWithIV(iv [secretIVBytes]byte, plain string) string {
	sealed := k.aead.Seal(iv[:], iv[:], []byte(plain), nil)
	return encryptedPrefix + base64.StdEncoding.EncodeToString(sealed)
}

// decodeJavaBase64 accepts what java.util.Base64.getDecoder() accepts:
// padded or unpadded standard base64. Go's decoder silently skips CR and LF,
// which Java rejects, so they are refused here.
func decodeJavaBase64(s string) ([]byte, error) {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return nil, base64.CorruptInputError(i)
	}
	if strings.HasSuffix(s, "=") || len(s)%4 == 0 {
		return base64.StdEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}
