package proto

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"unicode"
)

// signaturePrefix names the algorithm in the X-Cycles-Signature value.
const signaturePrefix = "sha256="

// Sign is the X-Cycles-Signature value for body: "sha256=" followed by the
// lowercase hex HMAC-SHA256 of the exact body bytes, keyed with the UTF-8
// bytes of the decrypted secret. There is no timestamp in the signed
// message, so receivers that want replay protection must dedupe on
// X-Cycles-Event-Id.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	sum := mac.Sum(nil)
	out := make([]byte, len(signaturePrefix)+hex.EncodedLen(len(sum)))
	copy(out, signaturePrefix)
	hex.Encode(out[len(signaturePrefix):], sum)
	return string(out)
}

// Verify reports whether header is the signature Sign gives for secret and
// body. The comparison takes the same time wherever the first difference is,
// so a receiver using it does not leak how much of a forged signature was
// right. Only the exact wire form is accepted (lowercase hex, the prefix).
func Verify(secret string, body []byte, header string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(header))
}

// SecretUsable reports whether a decrypted secret signs deliveries. A blank
// secret (empty or whitespace only, by Java's String.isBlank) means the
// delivery goes out without X-Cycles-Signature, as the reference sends it:
// admin stores a blank secret when a PATCH sets one.
func SecretUsable(secret string) bool {
	for _, r := range secret {
		if !javaWhitespace(r) {
			return true
		}
	}
	return false
}

// javaWhitespace is Java's Character.isWhitespace, which isBlank uses. It is
// not unicode.IsSpace: Java counts the information separators U+001C–U+001F
// and excludes U+0085 and the non-breaking spaces.
func javaWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0x1C, 0x1D, 0x1E, 0x1F:
		return true
	case 0x00A0, 0x2007, 0x202F:
		return false
	}
	return unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}
