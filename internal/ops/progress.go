package ops

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progressMinTotal is the smallest batch worth a progress report: a few
// ids finish before anyone would read one.
const progressMinTotal = 100

// barRedraw bounds how often the terminal bar is redrawn.
const barRedraw = 100 * time.Millisecond

// newProgress returns a RequeueOptions.Progress that reports to w: a bar
// with counts redrawn in place on a terminal, plain lines at every tenth
// otherwise (logs and CI stay readable). Batches under progressMinTotal
// report nothing.
func newProgress(w io.Writer, tty bool, verb string) func(done, total int) {
	var last time.Time
	lastTenth := 0
	return func(done, total int) {
		if total < progressMinTotal {
			return
		}
		if !tty {
			if tenth := done * 10 / total; tenth > lastTenth {
				lastTenth = tenth
				fmt.Fprintf(w, "%s %d/%d\n", verb, done, total)
			}
			return
		}
		now := time.Now()
		if done < total && now.Sub(last) < barRedraw {
			return
		}
		last = now
		const width = 30
		filled := done * width / total
		fmt.Fprintf(w, "\r[%s%s] %d/%d %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, verb)
		if done == total {
			fmt.Fprintln(w)
		}
	}
}
