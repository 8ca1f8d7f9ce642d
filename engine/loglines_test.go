package engine_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

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
