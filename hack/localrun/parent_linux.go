package main

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// exitWithParent asks the kernel to send sig to this process when its
// parent dies, so it stops what it started instead of running on orphaned.
func exitWithParent(sig syscall.Signal) error {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(sig), 0, 0, 0); err != nil {
		return fmt.Errorf("setting the parent-death signal: %w", err)
	}
	return nil
}
