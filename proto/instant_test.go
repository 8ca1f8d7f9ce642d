package proto

import (
	"testing"
	"time"
)

func TestFormatInstant_PrintsFractionInGroupsOfThree(t *testing.T) {
	base := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		ns   int
		want string
	}{
		{0, "2026-04-01T12:00:00Z"},
		{100_000_000, "2026-04-01T12:00:00.100Z"},
		{118_000_000, "2026-04-01T12:00:00.118Z"},
		{123_456_000, "2026-04-01T12:00:00.123456Z"},
		{100_000, "2026-04-01T12:00:00.000100Z"},
		{123_456_789, "2026-04-01T12:00:00.123456789Z"},
		{1, "2026-04-01T12:00:00.000000001Z"},
	}
	for _, tt := range tests {
		if got := FormatInstant(base.Add(time.Duration(tt.ns))); got != tt.want {
			t.Errorf("FormatInstant(+%dns) = %s, want %s", tt.ns, got, tt.want)
		}
	}
}

func TestFormatInstant_ConvertsToUTC(t *testing.T) {
	local := time.Date(2026, 4, 1, 14, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	if got := FormatInstant(local); got != "2026-04-01T12:00:00Z" {
		t.Errorf("FormatInstant = %s", got)
	}
}

func TestParseInstant_ReadsContractTimestamps(t *testing.T) {
	for _, s := range []string{
		"2026-04-01T12:00:00Z",
		"2026-04-01T12:00:00.100Z",
		"2026-04-01T12:00:00.118Z",
		"2026-04-01T12:00:00.123456Z",
		"2026-04-01T12:00:00.123456789Z",
		"2026-04-01T12:07:41.502117Z",
		"2026-04-01T12:00:01.224Z",
	} {
		got, err := ParseInstant(s)
		if err != nil {
			t.Errorf("ParseInstant(%s): %v", s, err)
			continue
		}
		if back := FormatInstant(got); back != s {
			t.Errorf("round trip of %s gave %s", s, back)
		}
		if got.Location() != time.UTC {
			t.Errorf("ParseInstant(%s) is in %v, want UTC", s, got.Location())
		}
	}
}

func TestParseInstant_NormalisesOtherFormsToJavaForm(t *testing.T) {
	tests := map[string]string{
		"2026-04-01T12:00:00.1Z":      "2026-04-01T12:00:00.100Z",
		"2026-04-01T12:00:00.1234Z":   "2026-04-01T12:00:00.123400Z",
		"2026-04-01T14:00:00+02:00":   "2026-04-01T12:00:00Z",
		"2026-04-01T12:00:00.000000Z": "2026-04-01T12:00:00Z",
	}
	for in, want := range tests {
		got, err := ParseInstant(in)
		if err != nil {
			t.Errorf("ParseInstant(%s): %v", in, err)
			continue
		}
		if s := FormatInstant(got); s != want {
			t.Errorf("ParseInstant(%s) formats as %s, want %s", in, s, want)
		}
	}
}

func TestParseInstant_RejectsNonInstants(t *testing.T) {
	for _, s := range []string{"", "2026-04-01", "2026-04-01T12:00:00", "1775044800", "2026-13-01T00:00:00Z", "not a date",
		"2026-04-01T23:59:60Z", "9999-12-31T23:59:59-01:00", "0000-01-01T00:00:00+01:00"} {
		if _, err := ParseInstant(s); err == nil {
			t.Errorf("ParseInstant(%q) accepted it", s)
		}
	}
}

func TestMillisInstant_TruncatesToTheMillisecond(t *testing.T) {
	in := time.Date(2026, 4, 1, 12, 0, 1, 224_999_999, time.UTC)
	if got := FormatInstant(MillisInstant(in)); got != "2026-04-01T12:00:01.224Z" {
		t.Errorf("MillisInstant = %s", got)
	}
}

func TestInstant_JSONRoundTrip(t *testing.T) {
	var i Instant
	if err := i.UnmarshalJSON([]byte(`"2026-04-01T12:00:00.100Z"`)); err != nil {
		t.Fatal(err)
	}
	b, _ := i.MarshalJSON()
	if string(b) != `"2026-04-01T12:00:00.100Z"` {
		t.Errorf("MarshalJSON = %s", b)
	}
	if err := i.UnmarshalJSON([]byte(`1775044800`)); err == nil {
		t.Errorf("a numeric instant was accepted")
	}
}

func FuzzParseInstant(f *testing.F) {
	f.Add("2026-04-01T12:00:00.123456Z")
	f.Add("2026-04-01T14:00:00.1+02:00")
	f.Add("2026-04-01T12:00:00Z")
	f.Add("")
	f.Add("9999-12-31T23:59:59-01:00")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseInstant(s)
		if err != nil {
			return
		}
		formatted := FormatInstant(got)
		again, err := ParseInstant(formatted)
		if err != nil {
			t.Fatalf("%q parsed, but its Java form %q does not: %v", s, formatted, err)
		}
		if !again.Equal(got) || FormatInstant(again) != formatted {
			t.Errorf("%q: round trip through %q changed the instant", s, formatted)
		}
	})
}
