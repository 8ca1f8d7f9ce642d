package proto

import (
	"encoding/json"
	"testing"
)

func TestAppendJSONString_EscapesLikeJackson(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "acme-corp", `"acme-corp"`},
		{"empty", "", `""`},
		{"quote", `say "hi"`, `"say \"hi\""`},
		{"backslash", `a\b`, `"a\\b"`},
		{"short escapes", "\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"other C0 controls upper-case hex", "\x00\x01\x0b\x0e\x1f", `"\u0000\u0001\u000B\u000E\u001F"`},
		{"DEL raw", "a\x7fb", "\"a\x7fb\""},
		{"slash raw", "tenant:acme/*", `"tenant:acme/*"`},
		{"HTML characters raw", "<a href='x'>&</a>", `"<a href='x'>&</a>"`},
		{"line and paragraph separators raw", "a\u2028b\u2029c", "\"a\u2028b\u2029c\""},
		{"non-ASCII raw", "café ✓ 日本 🚀", `"café ✓ 日本 🚀"`},
		{"invalid byte replaced", "a\xffb", "\"a\uFFFDb\""},
		{"each invalid byte replaced", "\xc3\x28\xe2\x82", "\"\uFFFD(\uFFFD\uFFFD\""},
		{"encoded surrogate replaced per byte", "\xed\xa0\x80", "\"\uFFFD\uFFFD\uFFFD\""},
		{"real U+FFFD kept", "\uFFFD", "\"\uFFFD\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendJSONString(nil, tt.in)); got != tt.want {
				t.Errorf("AppendJSONString(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestAppendJSONString_AppendsAndStaysValidJSON(t *testing.T) {
	in := "x\"\\\x01\u2028é\xff/<>"
	got := AppendJSONString([]byte(`{"k":`), in)
	got = append(got, '}')
	var v map[string]string
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("output %s is not JSON: %v", got, err)
	}
	if want := "x\"\\\x01\u2028é\uFFFD/<>"; v["k"] != want {
		t.Errorf("decoded %q, want %q", v["k"], want)
	}
}
