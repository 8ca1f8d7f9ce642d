//go:build !linux

package redisproc

import "os/exec"

// setDeathSignal has no portable equivalent outside Linux; there the child is
// only cleaned up by Stop or Kill.
func setDeathSignal(*exec.Cmd) {}
