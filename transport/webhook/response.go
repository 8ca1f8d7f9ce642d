package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jetrelay/jetrelay/transport"
)

// MaxRetryAfter caps the wait a receiver may ask for, so that a typo or a
// hostile Retry-After cannot park a delivery for days.
const MaxRetryAfter = time.Hour

// classify turns a receiver's answer into a Result: 2xx delivered; 429, or
// 503 with Retry-After, throttled; anything else (3xx included: redirects
// are not followed) failed. now anchors an HTTP-date Retry-After.
func classify(resp *http.Response, latency time.Duration, now time.Time) transport.Result {
	r := transport.Result{StatusCode: resp.StatusCode, Latency: latency}
	retryAfter := strings.TrimSpace(resp.Header.Get("Retry-After"))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		r.Outcome = transport.Delivered
		return r
	case resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode == http.StatusServiceUnavailable && retryAfter != "":
		r.Outcome = transport.Throttled
		r.RetryAfter = parseRetryAfter(retryAfter, now)
	default:
		r.Outcome = transport.Failed
	}
	r.Message = "HTTP " + strconv.Itoa(resp.StatusCode)
	return r
}

// parseRetryAfter reads RFC 9110 Retry-After: delta-seconds or an
// HTTP-date, capped at MaxRetryAfter. An invalid or past value is 0, which
// leaves the wait to the subscription's retry policy.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter // only digits, so err is overflow
		}
		return time.Duration(secs) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(at.Sub(now), 0), MaxRetryAfter)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
