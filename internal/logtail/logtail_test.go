package logtail

import "testing"

func TestTail_KeepsOnlyTheLastBytes(t *testing.T) {
	tail := New(10)
	for _, s := range []string{"first line\n", "second line\n", "the end\n"} {
		if n, err := tail.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	// The last 10 bytes are "e\nthe end\n"; String trims the newline.
	if got := tail.String(); got != "e\nthe end" {
		t.Fatalf("String() = %q, want %q", got, "e\nthe end")
	}
	tail.Reset()
	if got := tail.String(); got != "" {
		t.Fatalf("after Reset String() = %q", got)
	}
}
