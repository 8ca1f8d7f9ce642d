package transport_test

import (
	"strings"
	"testing"

	"github.com/jetrelay/jetrelay/transport"
)

func TestValidReason_AcceptsOnlyShortMetricSafeTokens(t *testing.T) {
	for _, s := range []string{"nats_stream_full", "sqs_throttled", "a", "x" + strings.Repeat("1", 31)} {
		if !transport.ValidReason(s) {
			t.Errorf("ValidReason(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", "Stream_full", "1abc", "_x", "stream full", "stream-full", "x" + strings.Repeat("1", 32), "transport_error", "ssrf_blocked", "é"} {
		if transport.ValidReason(s) {
			t.Errorf("ValidReason(%q) = true, want false", s)
		}
	}
}

func TestAnswerReason_KeepsAValidReasonAndFoldsTheRestIntoOne(t *testing.T) {
	if got := transport.AnswerReason(transport.Result{Reason: "nats_stream_full"}); got != "nats_stream_full" {
		t.Errorf("valid reason: %q", got)
	}
	if got := transport.AnswerReason(transport.Result{Reason: "queue 42 is gone"}); got != transport.ReasonOther {
		t.Errorf("invalid reason: %q, want %q", got, transport.ReasonOther)
	}
	if got := transport.AnswerReason(transport.Result{StatusCode: 503}); got != "" {
		t.Errorf("HTTP answer: %q, want empty", got)
	}
}
