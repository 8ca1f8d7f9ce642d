package proto

import (
	"strings"
	"testing"
)

const w3cExample = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestParseTraceparent_ReadsValidHeaders(t *testing.T) {
	tests := []struct {
		in    string
		flags byte
	}{
		{w3cExample, 0x01},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", 0x00},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", 0xff},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			tp, err := ParseTraceparent(tt.in)
			if err != nil {
				t.Fatalf("ParseTraceparent: %v", err)
			}
			if tp.Flags != tt.flags {
				t.Errorf("flags = %#x, want %#x", tp.Flags, tt.flags)
			}
			if tp.TraceID[0] != 0x4b || tp.TraceID[15] != 0x36 || tp.SpanID[0] != 0x00 || tp.SpanID[7] != 0xb7 {
				t.Errorf("ids decoded wrongly: %x %x", tp.TraceID, tp.SpanID)
			}
			if got := tp.String(); got != tt.in {
				t.Errorf("String() = %s, want %s", got, tt.in)
			}
		})
	}
}

func TestParseTraceparent_RejectsMalformedHeaders(t *testing.T) {
	tests := map[string]string{
		"empty":              "",
		"upper-case hex":     "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"upper-case flags":   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
		"version 01":         "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"version ff":         "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"future with suffix": "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"v00 with suffix":    w3cExample + "-x",
		"all-zero trace id":  "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"all-zero span id":   "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"short trace id":     "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
		"wrong separator":    "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"non-hex":            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
		"leading space":      " " + w3cExample[:54],
		"CRLF tail":          w3cExample[:53] + "\r\n",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseTraceparent(in); err == nil {
				t.Errorf("ParseTraceparent(%q) accepted it", in)
			}
		})
	}
}

func TestValidTraceID_IsTheReferenceRegexp(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"4bf92f3577b34da6a3ce929d0e0e4736", true},
		{"00000000000000000000000000000000", true}, // the reference keeps it
		{"4BF92F3577B34DA6A3CE929D0E0E4736", false},
		{"4bf92f3577b34da6a3ce929d0e0e473", false},
		{"4bf92f3577b34da6a3ce929d0e0e47366", false},
		{"4bf92f3577b34da6a3ce929d0e0e4736\n", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := ValidTraceID(tt.in); got != tt.want {
			t.Errorf("ValidTraceID(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestValidTraceFlags_IsTheReferenceRegexp(t *testing.T) {
	for in, want := range map[string]bool{"01": true, "00": true, "ff": true, "0A": false, "1": false, "001": false, "": false, "0x": false} {
		if got := ValidTraceFlags(in); got != want {
			t.Errorf("ValidTraceFlags(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestNewTraceAndSpanIDs_AreFreshValidHex(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tr, sp := NewTraceID(), NewSpanID()
		if !ValidTraceID(tr) || tr == strings.Repeat("0", 32) {
			t.Fatalf("NewTraceID = %q", tr)
		}
		if len(sp) != 16 || !isLowerHex(sp) || sp == strings.Repeat("0", 16) {
			t.Fatalf("NewSpanID = %q", sp)
		}
		if seen[tr] || seen[sp] {
			t.Fatalf("id repeated: %s %s", tr, sp)
		}
		seen[tr], seen[sp] = true, true
	}
}

func TestOutboundTrace_FollowsTheReferenceRules(t *testing.T) {
	yes, no := true, false
	const eventTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	tests := []struct {
		name       string
		eventTrace string
		delivery   *Delivery
		keepTrace  bool
		wantFlags  string
	}{
		{"valid event trace, no delivery", eventTrace, nil, true, "01"},
		{"inbound valid with flags 00", eventTrace, &Delivery{TraceFlags: "00", TraceparentInboundValid: &yes}, true, "00"},
		{"inbound invalid keeps default", eventTrace, &Delivery{TraceFlags: "00", TraceparentInboundValid: &no}, true, "01"},
		{"inbound validity unknown", eventTrace, &Delivery{TraceFlags: "00"}, true, "01"},
		{"inbound valid but flags malformed", eventTrace, &Delivery{TraceFlags: "0A", TraceparentInboundValid: &yes}, true, "01"},
		{"inbound valid but flags empty", eventTrace, &Delivery{TraceparentInboundValid: &yes}, true, "01"},
		{"all-zero event trace is kept", strings.Repeat("0", 32), nil, true, "01"},
		{"upper-case event trace is replaced", strings.ToUpper(eventTrace), nil, false, "01"},
		{"missing event trace is replaced", "", nil, false, "01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			traceID, tp := OutboundTrace(tt.eventTrace, tt.delivery)
			if tt.keepTrace && traceID != tt.eventTrace {
				t.Errorf("trace id = %s, want the event's %s", traceID, tt.eventTrace)
			}
			if !ValidTraceID(traceID) || (!tt.keepTrace && traceID == tt.eventTrace) {
				t.Errorf("trace id = %q, want a fresh valid one", traceID)
			}
			parts := strings.Split(tp, "-")
			if len(parts) != 4 || parts[0] != "00" || parts[1] != traceID || parts[3] != tt.wantFlags {
				t.Fatalf("traceparent = %s, want 00-%s-<span>-%s", tp, traceID, tt.wantFlags)
			}
			if len(parts[2]) != 16 || !isLowerHex(parts[2]) {
				t.Errorf("span id %q is not 16 lowercase hex", parts[2])
			}
			// An all-zero trace id is passed through as the reference does,
			// even though W3C receivers will discard such a header.
			if _, err := ParseTraceparent(tp); err != nil && traceID != strings.Repeat("0", 32) {
				t.Errorf("outbound traceparent does not parse: %v", err)
			}
		})
	}
}

func TestOutboundTrace_UsesAFreshSpanEveryAttempt(t *testing.T) {
	_, a := OutboundTrace("4bf92f3577b34da6a3ce929d0e0e4736", nil)
	_, b := OutboundTrace("4bf92f3577b34da6a3ce929d0e0e4736", nil)
	if a == b {
		t.Errorf("two attempts sent the same traceparent %s", a)
	}
}

func TestBuildTraceparent_JoinsParts(t *testing.T) {
	if got := BuildTraceparent("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "01"); got != w3cExample {
		t.Errorf("BuildTraceparent = %s, want %s", got, w3cExample)
	}
}

func FuzzParseTraceparent(f *testing.F) {
	f.Add(w3cExample)
	f.Add("00-00000000000000000000000000000000-00f067aa0ba902b7-01")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTraceparent(s)
		if err != nil {
			return
		}
		if got := tp.String(); got != s {
			t.Errorf("accepted %q but renders it as %q", s, got)
		}
	})
}
