package proto

import "testing"

func TestReservedHeader_CoversRelayAndFramingNames(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{HeaderContentType, true},
		{"content-type", true},
		{HeaderUserAgent, true},
		{HeaderEventID, true},
		{HeaderEventType, true},
		{HeaderTraceID, true},
		{HeaderSignature, true},
		{"x-cycles-signature", true},
		{"X-CYCLES-ANYTHING-NEW", true},
		{HeaderRequestID, true},
		{HeaderTraceparent, true},
		{"Traceparent", true},
		{"tracestate", true},
		{"Host", true},
		{"Content-Length", true},
		{"Transfer-Encoding", true},
		{"connection", true},
		{"Keep-Alive", true},
		{"Proxy-Connection", true},
		{"Upgrade", true},
		{"Expect", true},
		{"TE", true},
		{"Trailer", true},
		{"Authorization", false},
		{"X-Api-Key", false},
		{"X-Cycles", false}, // no dash: not in the X-Cycles-* family
		{"X-Request-Ids", false},
		{"Content-Type-Options", false},
	}
	for _, tt := range tests {
		if got := ReservedHeader(tt.name); got != tt.want {
			t.Errorf("ReservedHeader(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestValidHeaderName_AcceptsOnlyTokens(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"Authorization", true},
		{"X-Api-Key_2", true},
		{"!#$%&'*+-.^_`|~09azAZ", true},
		{"", false},
		{"Bad Name", false},
		{"Colon:", false},
		{"New\nLine", false},
		{"Quote\"", false},
		{"(paren)", false},
		{"Ünïcode", false},
		{"Tab\t", false},
	}
	for _, tt := range tests {
		if got := ValidHeaderName(tt.name); got != tt.want {
			t.Errorf("ValidHeaderName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestValidHeaderValue_RefusesControlCharacters(t *testing.T) {
	tests := []struct {
		value string
		want  bool
	}{
		{"Bearer tok_abc", true},
		{"", true},
		{"tab\tinside", true},
		{"ünïcode and obs-text \xff", true},
		{"inject\r\nX-Evil: 1", false},
		{"lf\n", false},
		{"cr\r", false},
		{"nul\x00", false},
		{"bell\x07", false},
		{"del\x7f", false},
	}
	for _, tt := range tests {
		if got := ValidHeaderValue(tt.value); got != tt.want {
			t.Errorf("ValidHeaderValue(%q) = %v, want %v", tt.value, got, tt.want)
		}
	}
}
