package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the child when the bench dies (a
// panic, a SIGKILL), so no relay outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
