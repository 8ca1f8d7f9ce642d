package pgproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the postmaster when the process that
// started it dies, so a test binary killed by a timeout or a signal does not
// leave a server behind; as root it also runs it as uid/gid (postgres refuses
// root). Go sets the death signal after the ids, which would otherwise clear it.
func setDeathSignal(cmd *exec.Cmd, asUser bool, uid, gid uint32) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if asUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid}
	}
}
