package redisproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill redis-server when the process that
// started it dies, so a test binary killed by a timeout or a signal does not
// leave servers behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
