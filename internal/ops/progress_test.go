package ops

import (
	"strings"
	"testing"
)

func TestProgress_DrawsABarOnATerminalAndPlainLinesElsewhere(t *testing.T) {
	var tty, plain strings.Builder
	bar, lines := newProgress(&tty, true, "requeued"), newProgress(&plain, false, "requeued")
	for i := 1; i <= 1000; i++ {
		bar(i, 1000)
		lines(i, 1000)
	}
	if !strings.Contains(tty.String(), "\r[##############################] 1000/1000 requeued\n") {
		t.Errorf("terminal bar did not end full:\n%q", tty.String())
	}
	got := strings.Split(strings.TrimSpace(plain.String()), "\n")
	if len(got) != 10 || got[0] != "requeued 100/1000" || got[9] != "requeued 1000/1000" || strings.Contains(plain.String(), "\r") {
		t.Errorf("plain lines: %q", got)
	}
	var small strings.Builder
	few := newProgress(&small, true, "requeued")
	for i := 1; i <= 5; i++ {
		few(i, 5)
	}
	if small.Len() != 0 {
		t.Errorf("a batch of 5 reported progress: %q", small.String())
	}
}
