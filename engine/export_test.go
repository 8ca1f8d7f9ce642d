package engine

import "time"

// StallKeepAlive makes e signal the items it holds only an hour after it
// took them: like a replica frozen mid-send (a long GC pause, SIGSTOP), e
// lets AckWait pass on them, so the server hands them out again. Call it
// before Run.
func StallKeepAlive(e *Engine) { e.alive = newKeepAlive(time.Hour) }
