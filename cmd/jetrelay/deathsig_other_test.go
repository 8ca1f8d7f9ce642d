//go:build !linux

package main

import "os/exec"

// setDeathSignal does nothing where the kernel has no parent-death signal;
// t.Cleanup still kills every child of a test that ends normally.
func setDeathSignal(*exec.Cmd) {}
