package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill a jetrelay child when the test binary
// dies (a -timeout panic, a Ctrl-C), so no relay outlives its test.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
