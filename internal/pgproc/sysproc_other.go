//go:build !linux

package pgproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has no portable equivalent outside Linux; there the server
// is only cleaned up by Stop. As root it still runs postgres as uid/gid.
func setDeathSignal(cmd *exec.Cmd, asUser bool, uid, gid uint32) {
	if asUser {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	}
}
