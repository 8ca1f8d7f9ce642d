package soak

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill a child when the soak dies, so an
// aborted run leaves no servers behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
