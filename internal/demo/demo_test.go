package demo

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDemo_ShowsSuccessRetryAndFailure(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), options{events: 5, timeout: 60 * time.Second}, &stdout, &stderr, "test", os.Getenv); err != nil {
		t.Fatalf("jetrelay demo: %v; output:\n%s\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	rows := summaryRows(t, out)
	healthy, flaky, dead := rows["healthy"], rows["flaky"], rows["dead"]
	if healthy.deliveries != 5 || healthy.success != 5 || !strings.Contains(healthy.receiver, "5 / 0 / 0") || !strings.Contains(healthy.status, "ACTIVE") {
		t.Errorf("healthy row %+v: want 5 delivered once each, correctly signed, subscription ACTIVE", healthy)
	}
	if flaky.deliveries != 5 || flaky.success != 5 || flaky.sends <= flaky.deliveries || !strings.Contains(flaky.status, "ACTIVE") {
		t.Errorf("flaky row %+v: want all 5 delivered after retries, subscription ACTIVE", flaky)
	}
	// The dead subscription is disabled once 3 deliveries failed (sends
	// already in flight may fail a few more); admin queues nothing for it
	// after that, and what was queued waits (held).
	if dead.failed < 3 || dead.success != 0 || dead.failed+dead.held != dead.deliveries || !strings.Contains(dead.status, "DISABLED") {
		t.Errorf("dead row %+v: want at least 3 failed, the rest held, subscription DISABLED", dead)
	}
	if !strings.Contains(out, "HELD") {
		t.Errorf("summary does not explain held deliveries:\n%s", out)
	}
}

// demoRow is one line of the demo's summary table.
type demoRow struct {
	deliveries, success, failed, held, sends int
	receiver, status                         string
}

// summaryRows parses the table after the SUBSCRIPTION header: name, five
// counts, the receiver column, then the subscription status (two words).
func summaryRows(t *testing.T, out string) map[string]demoRow {
	t.Helper()
	_, table, ok := strings.Cut(out, "SUBSCRIPTION")
	if !ok {
		t.Fatalf("demo output has no summary table:\n%s", out)
	}
	rows := map[string]demoRow{}
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 {
			break
		}
		var n [5]int
		for i := range n {
			v, err := strconv.Atoi(f[i+1])
			if err != nil {
				t.Fatalf("summary row %q: column %d is not a count", line, i+2)
			}
			n[i] = v
		}
		rows[f[0]] = demoRow{
			deliveries: n[0], success: n[1], failed: n[2], held: n[3], sends: n[4],
			receiver: strings.Join(f[6:len(f)-2], " "), status: strings.Join(f[len(f)-2:], " "),
		}
	}
	return rows
}
