package proto

import "testing"

func TestSign_MatchesContractVectors(t *testing.T) {
	if n := len(exampleBudgetExhaustedEvent); n != 498 {
		t.Fatalf("§3.2 example body is %d bytes, the contract says 498", n)
	}
	tests := []struct {
		name, secret, body, want string
	}{
		{"short body", "whsec_test", `{"event_id":"evt-1","event_type":"tenant.created"}`,
			"sha256=d7b67b68f87f79ef401e2e9007f9211c6d88c0a915cb879effbb86ca1cfe787d"},
		{"§3.2 example body", "whsec_test", exampleBudgetExhaustedEvent,
			"sha256=e71c34073b4f954fedbbc17102c92cedf55947ada21693b2153bb0a511cd178e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sign(tt.secret, []byte(tt.body)); got != tt.want {
				t.Errorf("Sign = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestVerify_AcceptsOnlyTheExactSignatureOfTheBody(t *testing.T) {
	body := []byte(exampleBudgetExhaustedEvent)
	good := "sha256=e71c34073b4f954fedbbc17102c92cedf55947ada21693b2153bb0a511cd178e"
	tests := []struct {
		name, secret, header string
		body                 []byte
		want                 bool
	}{
		{"exact signature", "whsec_test", good, body, true},
		{"other secret", "whsec_other", good, body, false},
		{"body changed by one byte", "whsec_test", good, append([]byte(exampleBudgetExhaustedEvent[:497]), ' '), false},
		{"upper-case hex", "whsec_test", "sha256=E71C34073B4F954FEDBBC17102C92CEDF55947ADA21693B2153BB0A511CD178E", body, false},
		{"missing prefix", "whsec_test", good[len("sha256="):], body, false},
		{"truncated", "whsec_test", good[:len(good)-1], body, false},
		{"empty header", "whsec_test", "", body, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verify(tt.secret, tt.body, tt.header); got != tt.want {
				t.Errorf("Verify = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSecretUsable_FollowsJavaIsBlank(t *testing.T) {
	tests := []struct {
		name, secret string
		want         bool
	}{
		{"empty", "", false},
		{"spaces", "   ", false},
		{"tabs and newlines", "\t\r\n\v\f", false},
		{"information separators", "\x1c\x1d\x1e\x1f", false},
		{"ideographic and line separators", "\u3000\u2028\u2029\u2003", false},
		{"generated secret", "whsec_AbC", true},
		{"secret with surrounding space", "  s  ", true},
		{"no-break space is not blank in Java", "\u00a0", true},
		{"figure space is not blank in Java", "\u2007", true},
		{"next line is not blank in Java", "\u0085", true},
		{"NUL is not blank", "\x00", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SecretUsable(tt.secret); got != tt.want {
				t.Errorf("SecretUsable(%q) = %v, want %v", tt.secret, got, tt.want)
			}
		})
	}
}
