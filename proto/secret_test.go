package proto

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// contractKey is bytes 0x00..0x1f, the §4.1 test vector key.
const contractKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

func mustKey(t *testing.T, b64 string) *SecretKey {
	t.Helper()
	k, err := ParseSecretKey(b64)
	if err != nil {
		t.Fatalf("ParseSecretKey: %v", err)
	}
	return k
}

func TestSecretKey_ReproducesContractVector(t *testing.T) {
	k := mustKey(t, contractKey)
	var iv [12]byte
	for i := range iv {
		iv[i] = 0xa0 + byte(i)
	}
	const want = "enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd5kdFcPheIhlCI483dCw="
	if got := k.encryptWithIV(iv, "whsec_test"); got != want {
		t.Errorf("encrypt = %s, want %s", got, want)
	}
	plain, err := k.Decrypt(want)
	if err != nil || plain != "whsec_test" {
		t.Errorf("Decrypt = %q, %v; want whsec_test", plain, err)
	}
}

func TestSecretKey_EncryptRoundTripsWithFreshIVs(t *testing.T) {
	k := mustKey(t, contractKey)
	for _, plain := range []string{"whsec_test", "", "ünïcödé ✓", strings.Repeat("x", 4096)} {
		a, err := k.Encrypt(plain)
		if err != nil {
			t.Fatalf("Encrypt: %v", err)
		}
		b, _ := k.Encrypt(plain)
		if a == b {
			t.Errorf("two encryptions of %q are identical; the IV is not fresh", plain)
		}
		if !strings.HasPrefix(a, "enc:") {
			t.Errorf("Encrypt = %q, want the enc: prefix", a)
		}
		got, err := DecryptSecret(k, a)
		if err != nil || got != plain {
			t.Errorf("round trip of %q = %q, %v", plain, got, err)
		}
	}
}

func TestDecryptSecret_ReturnsPlaintextValuesAsIs(t *testing.T) {
	for _, k := range []*SecretKey{nil, mustKey(t, contractKey)} {
		for _, stored := range []string{"whsec_plain", "", "ENC:looks-encrypted-but-is-not", " enc:x"} {
			got, err := DecryptSecret(k, stored)
			if err != nil || got != stored {
				t.Errorf("DecryptSecret(%v, %q) = %q, %v; want it unchanged", k, stored, got, err)
			}
		}
	}
}

func TestDecryptSecret_FailsClosed(t *testing.T) {
	const stored = "enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd5kdFcPheIhlCI483dCw="
	otherKey := mustKey(t, "HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=")
	key := mustKey(t, contractKey)
	tests := []struct {
		name   string
		key    *SecretKey
		stored string
		want   error
	}{
		{"no key configured", nil, stored, ErrSecretKeyMissing},
		{"wrong key", otherKey, stored, ErrSecretUndecryptable},
		{"bad base64", key, "enc:not*base64!", ErrSecretUndecryptable},
		{"line break inside base64", key, "enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd\n5kdFcPheIhlCI483dCw=", ErrSecretUndecryptable},
		{"shorter than IV and tag", key, "enc:oKGio6SlpqeoqaqrkXAPSCaU", ErrSecretUndecryptable},
		{"empty payload", key, "enc:", ErrSecretUndecryptable},
		{"tampered ciphertext", key, "enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd5kdFcPhfIhlCI483dCw=", ErrSecretUndecryptable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecryptSecret(tt.key, tt.stored)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if got != "" {
				t.Errorf("returned %q alongside the error", got)
			}
			for _, leak := range []string{tt.stored, tt.stored[len("enc:"):], "whsec_test", contractKey} {
				if leak != "" && strings.Contains(err.Error(), leak) {
					t.Errorf("error %q leaks %q", err, leak)
				}
			}
		})
	}
}

func TestEncrypt_WithoutKeyFails(t *testing.T) {
	var k *SecretKey
	if _, err := k.Encrypt("whsec_test"); !errors.Is(err, ErrSecretKeyMissing) {
		t.Errorf("err = %v, want ErrSecretKeyMissing", err)
	}
}

func TestParseSecretKey_AcceptsWhatJavaBase64Accepts(t *testing.T) {
	unpadded := strings.TrimRight(contractKey, "=")
	for _, b64 := range []string{contractKey, unpadded} {
		k, err := ParseSecretKey(b64)
		if err != nil {
			t.Fatalf("ParseSecretKey(%q): %v", b64, err)
		}
		if got, err := k.Decrypt("enc:oKGio6SlpqeoqaqrkXAPSCaUdtoREVzd5kdFcPheIhlCI483dCw="); err != nil || got != "whsec_test" {
			t.Errorf("key parsed from %q decrypts to %q, %v", b64, got, err)
		}
	}
}

func TestParseSecretKey_RejectsBadKeysWithoutQuotingThem(t *testing.T) {
	tests := []struct {
		name, b64, wantMsg string
	}{
		{"16 bytes", "AAECAwQFBgcICQoLDA0ODw==", "encryption key must be 32 bytes (256 bits), got 16"},
		{"33 bytes", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g", "encryption key must be 32 bytes (256 bits), got 33"},
		{"empty", "", "got 0"},
		{"url alphabet", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh_-", "not valid base64"},
		{"trailing newline", contractKey + "\n", "not valid base64"},
		{"extra padding", contractKey + "=", "not valid base64"},
		{"space inside", "AAECAwQFBgcICQoL DA0ODxAREhMUFRYXGBkaGxwdHh8=", "not valid base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseSecretKey(tt.b64)
			if err == nil {
				t.Fatalf("ParseSecretKey accepted %q", tt.b64)
			}
			if k != nil {
				t.Errorf("returned a key alongside the error")
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not say %q", err, tt.wantMsg)
			}
			if tt.b64 != "" && strings.Contains(err.Error(), strings.TrimSpace(tt.b64)) {
				t.Errorf("error %q quotes the key", err)
			}
		})
	}
}

func TestSecretKey_NeverPrintsKeyMaterial(t *testing.T) {
	k := mustKey(t, contractKey)
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k)} {
		if strings.Contains(s, "AAEC") || strings.Contains(s, "0x") {
			t.Errorf("formatted key %q may expose material", s)
		}
		if !strings.Contains(s, "redacted") {
			t.Errorf("formatted key %q does not say it is redacted", s)
		}
	}
}
