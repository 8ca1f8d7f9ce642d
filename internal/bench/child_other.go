//go:build !linux

package bench

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death signal;
// the bench still stops its child whenever it ends normally.
func dieWithParent(*exec.Cmd) {}
