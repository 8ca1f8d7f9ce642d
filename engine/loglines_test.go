package engine_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetrelay/jetrelay/engine"
	"github.com/jetrelay/jetrelay/internal/admin"
	"github.com/jetrelay/jetrelay/internal/receiver"
)

// syncBuffer is a bytes.Buffer the engine's workers may write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A log line that names a key twice (trace_id=… trace_id=…) is noise to a
// person and ambiguous to a log pipeline, which keeps one of the two.
func TestLogs_NoLineNamesAKeyTwice(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	e := newEnv(t, envOptions{engine: func(c *engine.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	// A retry, then a final failure: the lines that carry the most keys.
	sub, _, _ := e.subscribe(t, "/down", receiver.Always(http.StatusInternalServerError), func(s *admin.Subscription) {
		s.RetryPolicy = fastPolicy(1)
	})
	id := e.deliver(t, sub, e.event(), nil)
	e.final(t, id)
	key := regexp.MustCompile(`(?:^| )([a-z_.]+)=`)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var checked int
	for _, line := range lines {
		if !strings.Contains(line, id) {
			continue
		}
		checked++
		seen := map[string]bool{}
		for _, m := range key.FindAllStringSubmatch(line, -1) {
			if seen[m[1]] {
				t.Errorf("key %s twice in: %s", m[1], line)
			}
			seen[m[1]] = true
		}
	}
	if checked < 2 {
		t.Fatalf("only %d log lines name the delivery; want its retry and its failure:\n%s", checked, out.String())
	}
}

// Every line about a delivery names it the same way, first: its id, its
// subscription and event, the attempt and the trace it was sent in (and,
// after a send that failed, the status code), then the line's own fields.
func TestLogs_EachLineNamesItsDeliveryFirst(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	e := newEnv(t, envOptions{engine: func(c *engine.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	okSub, _, _ := e.subscribe(t, "/ok", receiver.Always(http.StatusOK), nil)
	downSub, _, _ := e.subscribe(t, "/down", receiver.Always(http.StatusInternalServerError), func(s *admin.Subscription) {
		s.RetryPolicy = fastPolicy(1)
	})
	okEv, downEv := e.event(), e.event()
	okID, downID := e.deliver(t, okSub, okEv, nil), e.deliver(t, downSub, downEv, nil)
	e.final(t, okID)
	e.final(t, downID)

	// The line is written just after the outcome it reports.
	line := func(id, msg string) string {
		var found string
		waitFor(t, 10*time.Second, "the line "+msg+" of "+id, func() bool {
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Contains(l, "delivery_id="+id) && strings.Contains(l, "msg="+msg) {
					found = l
					return true
				}
			}
			return false
		})
		return found
	}
	field := regexp.MustCompile(`(?:^| )([a-z_.]+)=("(?:[^"\\]|\\.)*"|\S*)`)
	check := func(l string, want [][2]string) {
		t.Helper()
		var got [][2]string
		for _, m := range field.FindAllStringSubmatch(l, -1) {
			if m[1] != "time" && m[1] != "level" && m[1] != "msg" {
				got = append(got, [2]string{m[1], m[2]})
			}
		}
		if len(got) < len(want) {
			t.Fatalf("line has %d fields, want at least %d: %s", len(got), len(want), l)
		}
		for i, w := range want {
			if got[i][0] != w[0] || (w[1] != "*" && got[i][1] != w[1]) || got[i][1] == "" {
				t.Errorf("field %d is %s=%s, want %s=%s in: %s", i, got[i][0], got[i][1], w[0], w[1], l)
			}
		}
	}
	okEvID := e.final(t, okID).EventID
	check(line(okID, "delivered"), [][2]string{
		{"delivery_id", okID}, {"subscription_id", okSub}, {"event_id", okEvID}, {"attempt", "1"}, {"trace_id", "*"},
		{"outcome", "success"}, {"status_code", "200"}, {"latency_ms", "*"},
	})
	downRec := e.final(t, downID)
	check(line(downID, `"delivery failed"`), [][2]string{
		{"delivery_id", downID}, {"subscription_id", downSub}, {"event_id", downRec.EventID}, {"attempt", strconv.Itoa(downRec.Attempts)}, {"trace_id", "*"},
		{"status_code", "500"}, {"outcome", "failed"}, {"reason", "*"},
	})
}
