package proto

import "unicode/utf8"

// hexUpper is the digit set Jackson writes \u escapes with.
const hexUpper = "0123456789ABCDEF"

// AppendJSONString appends s to dst as a JSON string literal escaped exactly
// as Jackson escapes it, so that bodies jetrelay writes are byte-identical
// to the reference's (and so are their signatures): `"` and `\` escaped,
// \b \t \n \f \r in short form, other C0 controls as \u00XX with upper-case
// hex, and everything else raw — DEL, '/', '<', '>', '&', U+2028, U+2029 and
// all non-ASCII. Each byte of invalid UTF-8 becomes U+FFFD, as a Java string
// cannot carry it.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is pending raw output
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexUpper[c>>4], hexUpper[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
