package webhook_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/transport"
	"github.com/jetrelay/jetrelay/transport/webhook"
)

func TestDeliver_ClassifiesTheReceiversAnswer(t *testing.T) {
	httpDate := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	cases := []struct {
		name       string
		status     int
		retryAfter string
		outcome    transport.Outcome
		message    string
		// wait bounds the parsed Retry-After (an HTTP-date has 1s resolution).
		minWait, maxWait time.Duration
	}{
		{"200 delivered", 200, "", transport.Delivered, "", 0, 0},
		{"202 delivered", 202, "", transport.Delivered, "", 0, 0},
		{"299 delivered", 299, "", transport.Delivered, "", 0, 0},
		{"400 failed", 400, "", transport.Failed, "HTTP 400", 0, 0},
		{"404 failed", 404, "", transport.Failed, "HTTP 404", 0, 0},
		{"500 failed", 500, "", transport.Failed, "HTTP 500", 0, 0},
		{"500 ignores Retry-After", 500, "7", transport.Failed, "HTTP 500", 0, 0},
		{"503 without Retry-After failed", 503, "", transport.Failed, "HTTP 503", 0, 0},
		{"429 without Retry-After throttled", 429, "", transport.Throttled, "HTTP 429", 0, 0},
		{"429 delta seconds", 429, "7", transport.Throttled, "HTTP 429", 7 * time.Second, 7 * time.Second},
		{"503 delta seconds", 503, "0", transport.Throttled, "HTTP 503", 0, 0},
		{"503 HTTP-date", 503, httpDate(90 * time.Second), transport.Throttled, "HTTP 503", 88 * time.Second, 90 * time.Second},
		{"503 past HTTP-date", 503, httpDate(-time.Hour), transport.Throttled, "HTTP 503", 0, 0},
		{"429 capped delta", 429, "86400", transport.Throttled, "HTTP 429", time.Hour, time.Hour},
		{"429 overflowing delta", 429, "99999999999999999999999", transport.Throttled, "HTTP 429", time.Hour, time.Hour},
		{"429 capped HTTP-date", 429, httpDate(48 * time.Hour), transport.Throttled, "HTTP 429", time.Hour, time.Hour},
		{"429 negative delta", 429, "-5", transport.Throttled, "HTTP 429", 0, 0},
		{"503 garbage Retry-After", 503, "soon", transport.Throttled, "HTTP 503", 0, 0},
	}
	tr := newTransport(t, webhook.Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"error":"nope"}`))
			})
			res, err := tr.Deliver(context.Background(), newRequest(rcv.URL))
			if err != nil {
				t.Fatalf("Deliver: %v (an answer is never an error)", err)
			}
			if res.Outcome != tc.outcome || res.StatusCode != tc.status || res.Message != tc.message {
				t.Errorf("result = %v %d %q, want %v %d %q", res.Outcome, res.StatusCode, res.Message, tc.outcome, tc.status, tc.message)
			}
			if res.RetryAfter < tc.minWait || res.RetryAfter > tc.maxWait {
				t.Errorf("RetryAfter = %s, want within [%s, %s]", res.RetryAfter, tc.minWait, tc.maxWait)
			}
			if res.Latency <= 0 {
				t.Errorf("Latency = %s, want > 0", res.Latency)
			}
		})
	}
}

func TestDeliver_DoesNotFollowRedirects(t *testing.T) {
	for _, status := range []int{301, 302, 303, 307, 308} {
		target := newReceiver(t, nil)
		rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/elsewhere", status)
		})
		tr := newTransport(t, webhook.Config{})

		res, err := tr.Deliver(context.Background(), newRequest(rcv.URL))
		if err != nil {
			t.Fatalf("%d: Deliver: %v", status, err)
		}
		if res.Outcome != transport.Failed || res.StatusCode != status || res.Message != "HTTP "+strconv.Itoa(status) {
			t.Errorf("%d: result = %+v, want Failed with its status", status, res)
		}
		if n := len(target.requests()); n != 0 {
			t.Errorf("%d: redirect target received %d requests, want none", status, n)
		}
	}
}
