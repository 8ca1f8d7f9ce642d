package engine

import (
	"errors"
	"testing"

	"github.com/jetrelay/jetrelay/transport"
)

func TestReason_TellsAnAnswerThatSaidNoFromNoAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    outcome
		want string
	}{
		{"a broker's refusal", outcome{res: transport.Result{Outcome: transport.Throttled, StatusCode: 503, Reason: "nats_stream_full"}}, "nats_stream_full"},
		{"a refusal without a status code", outcome{res: transport.Result{Outcome: transport.Failed, Reason: "sqs_queue_not_found"}}, "sqs_queue_not_found"},
		{"an unsafe reason", outcome{res: transport.Result{Outcome: transport.Failed, Reason: "Queue {id} gone"}}, transport.ReasonOther},
		{"no answer", outcome{err: errors.New("connection refused")}, "transport_error"},
		{"an HTTP 503, unchanged", outcome{res: transport.Result{Outcome: transport.Failed, StatusCode: 503}}, "http_5xx"},
		{"an HTTP 404, unchanged", outcome{res: transport.Result{Outcome: transport.Failed, StatusCode: 404}}, "http_4xx"},
		{"an answer without code or reason", outcome{res: transport.Result{Outcome: transport.Failed}}, "transport_error"},
	} {
		if got := tc.o.reason(); got != tc.want {
			t.Errorf("%s: reason = %q, want %q", tc.name, got, tc.want)
		}
	}
}
