package queue

import (
	"strings"
	"testing"
)

func TestSubjectToken_RoundTripsEveryIDAsOneSafeToken(t *testing.T) {
	ids := []string{
		"del_0f3c9a", "7c9e6679-7425-40de-944b-e07fc1f90ae7", "a.b", "*", ">", "a b",
		"~x", "ünïcode", "x.>.*", strings.Repeat("z", MaxDeliveryIDLen),
	}
	seen := map[string]string{}
	for _, id := range ids {
		tok := SubjectToken(id)
		if strings.ContainsAny(tok, ".*> \t\r\n") || tok == "" {
			t.Errorf("SubjectToken(%q) = %q: not a single literal subject token", id, tok)
		}
		if other, dup := seen[tok]; dup {
			t.Errorf("ids %q and %q share the token %q", id, other, tok)
		}
		seen[tok] = id
		back, ok := ParseSubjectToken(tok)
		if !ok || back != id {
			t.Errorf("ParseSubjectToken(%q) = %q, %v; want %q", tok, back, ok, id)
		}
	}
}

func TestParseSubjectToken_RefusesTokensSubjectTokenNeverWrites(t *testing.T) {
	for _, tok := range []string{"", "a.b", "~", "~!!", "~" + "YWJj" /* "abc" is written plain */} {
		if id, ok := ParseSubjectToken(tok); ok {
			t.Errorf("ParseSubjectToken(%q) = %q, true; want false", tok, id)
		}
	}
}

func TestConfig_WaitingSubjectsSitUnderTheDispatchSubject(t *testing.T) {
	var c Config
	cases := map[string]string{
		c.ScheduleSubject("d1"):    "jetrelay.dispatch.sched.d1",
		c.ScheduleSubjects():       "jetrelay.dispatch.sched.>",
		c.HeldSubject("s.1", "d1"): "jetrelay.dispatch.held.~cy4x.d1",
		c.HeldSubjects("s1"):       "jetrelay.dispatch.held.s1.>",
		c.HeldSubjects(""):         "jetrelay.dispatch.held.>",
		c.KeeperSubject("b.1"):     "jetrelay.dispatch.keep.~Yi4x",
		c.KeeperSubjects():         "jetrelay.dispatch.keep.>",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
